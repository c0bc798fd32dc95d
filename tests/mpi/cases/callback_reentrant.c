// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.reentrant
// clean
// exit: 0
/* callback.reentrant: a delete callback, running during MPI_Comm_free, deletes another attribute
 * of the communicator it runs for and sets a third one on it. */
#include <mpi.h>
#include <stdio.h>

static int key_a, key_b, key_c;
static int refused = 0, ran = 0;

static int meddling_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)value; (void)extra;
  ++ran;
  if (MPI_Comm_delete_attr(comm, key_b) != MPI_SUCCESS) ++refused; /* BUG */
  if (MPI_Comm_set_attr(comm, key_c, (void*)3) != MPI_SUCCESS) ++refused; /* BUG */
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key_b, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key_c, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, meddling_delete, &key_a, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_attr(comm, key_b, (void*)2);
  MPI_Comm_set_attr(comm, key_a, (void*)1); /* newest: its callback runs first */
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key_a);
  MPI_Comm_free_keyval(&key_b);
  MPI_Comm_free_keyval(&key_c);

  if (rank == 0) printf("callback_reentrant: callback ran %d time(s), %d of 2 calls refused\n", ran, refused);
  MPI_Finalize();
  return 0;
}
