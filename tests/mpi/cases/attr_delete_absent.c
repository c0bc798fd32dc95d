// attrcheck-test: np=2 modes=shadow,emulate
// expect: attr.delete-absent
// clean
// exit: 0
/* attr.delete-absent: MPI_Comm_delete_attr of an attribute that is not set (MPICH succeeds,
 * Open MPI returns an error: the program tolerates both). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_delete_attr(comm, key); /* BUG: never set */
  MPI_Comm_set_attr(comm, key, (void*)1);
  MPI_Comm_delete_attr(comm, key); /* fine */
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key);

  if (rank == 0) printf("attr_delete_absent: done\n");
  MPI_Finalize();
  return 0;
}
