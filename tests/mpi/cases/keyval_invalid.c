// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.invalid
// clean
// exit: 0
/* keyval.invalid: MPI_KEYVAL_INVALID used as a keyval on set, get, delete and free. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int value = 5, flag = 1, failures = 0;
  void* got = NULL;
  if (MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, &value) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, &got, &flag) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_delete_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID) != MPI_SUCCESS) ++failures;
  int key = MPI_KEYVAL_INVALID;
  if (MPI_Comm_free_keyval(&key) != MPI_SUCCESS) ++failures;

  if (rank == 0) printf("keyval_invalid: %d of 4 calls failed\n", failures);
  MPI_Finalize();
  return 0;
}
