// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.unknown
// clean
// exit: 0
/* keyval.unknown: a keyval number that was never created (123456) on set, get and delete. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  const int bogus = 123456;
  int value = 5, flag = 0, failures = 0;
  void* got = NULL;
  if (MPI_Comm_set_attr(MPI_COMM_WORLD, bogus, &value) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, bogus, &got, &flag) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_delete_attr(MPI_COMM_WORLD, bogus) != MPI_SUCCESS) ++failures;

  if (rank == 0) printf("keyval_unknown: %d of 3 calls failed\n", failures);
  MPI_Finalize();
  return 0;
}
