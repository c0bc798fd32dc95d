// attrcheck-test: np=2 modes=shadow,emulate
// expect: object.invalid
// clean
// exit: 0
/* object.invalid: MPI_Comm_set_attr on MPI_COMM_NULL, and MPI_Comm_get_attr on a saved copy of
 * a communicator that was freed. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  int failures = 0;
  if (MPI_Comm_set_attr(MPI_COMM_NULL, key, (void*)1) != MPI_SUCCESS) ++failures; /* BUG */

  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_attr(comm, key, (void*)2);
  const MPI_Comm saved = comm;
  MPI_Comm_free(&comm);
  void* got = NULL;
  int flag = 0;
  if (MPI_Comm_get_attr(saved, key, &got, &flag) != MPI_SUCCESS) ++failures; /* BUG: freed */

  MPI_Comm_free_keyval(&key);
  if (rank == 0) printf("object_invalid: %d of 2 calls failed\n", failures);
  MPI_Finalize();
  return 0;
}
