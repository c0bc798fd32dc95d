// attrcheck-test: np=1 modes=shadow,emulate
// expect: callback.reentrant
// expect-portable-on openmpi: portability.delete-attribute-in-free-callback mpich-4.0 mpich-4.2 mpich-5.0
// expect-portable-on mpich-4.0: portability.delete-attribute-in-free-callback openmpi-4.1 openmpi-5.0 openmpi-6.0 mpich-4.2 mpich-5.0
// expect-portable-on mpich-4.2: portability.delete-attribute-in-free-callback openmpi-4.1 openmpi-5.0 openmpi-6.0 mpich-4.0
// expect-portable-on mpich-5.0: portability.delete-attribute-in-free-callback openmpi-4.1 openmpi-5.0 openmpi-6.0 mpich-4.0
// clean
// exit: 0
/* A delete callback that MPI_Comm_free runs deletes another attribute of the communicator being
 * freed. attrcheck refuses that delete (callback.reentrant); without it, Open MPI's MPI_Comm_free
 * fails, MPICH 4.0 aborts, later MPICH succeeds: the portability finding says so. */
#include <mpi.h>
#include <stdio.h>

static int key_a, key_b;

static int delete_other(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)value; (void)extra;
  MPI_Comm_delete_attr(comm, key_b); /* BUG: the communicator is being freed */
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_other, &key_a, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key_b, NULL);
  MPI_Comm_set_attr(comm, key_b, NULL);
  MPI_Comm_set_attr(comm, key_a, NULL);
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key_a);
  MPI_Comm_free_keyval(&key_b);
  MPI_Finalize();
  return 0;
}
