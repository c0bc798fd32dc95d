// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.freed
// clean
// exit: 0
/* keyval.freed: a saved copy of a keyval used after MPI_Comm_free_keyval, on set and on get.
 * No keyval is created after the free, so the number is not reused by the library. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  const int saved = key;
  MPI_Comm_free_keyval(&key);
  int invalidated = key == MPI_KEYVAL_INVALID;

  int value = 5, flag = 0, failures = 0;
  void* got = NULL;
  if (MPI_Comm_set_attr(MPI_COMM_WORLD, saved, &value) != MPI_SUCCESS) ++failures; /* BUG */
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, saved, &got, &flag) != MPI_SUCCESS) ++failures; /* BUG */

  if (rank == 0) printf("keyval_freed: handle invalidated %d\n", invalidated);
  MPI_Finalize();
  return 0;
}
