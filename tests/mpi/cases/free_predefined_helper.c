// attrcheck-test: np=2 modes=shadow,emulate
// expect: object.invalid
// expect-message: object.invalid MPI_Comm_free: MPI_COMM_WORLD is predefined
// expect-message: object.invalid MPI_Comm_free: MPI_COMM_SELF is predefined
// clean
// exit: 0
/* Two different erroneous calls at one call site: a helper frees whatever communicator it is
 * given, and is given MPI_COMM_WORLD and then MPI_COMM_SELF. They are two findings, each with its
 * own message (not one finding counted twice under the first message). noinline: one call site. */
#include <mpi.h>
#include <stdio.h>

__attribute__((noinline)) static int release(MPI_Comm comm) { return MPI_Comm_free(&comm); /* BUG for predefined ones */ }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  const MPI_Comm predefined[2] = {MPI_COMM_WORLD, MPI_COMM_SELF};
  int failed = 0;
  for (int i = 0; i < 2; ++i) failed += release(predefined[i]) != MPI_SUCCESS;
  if (rank == 0) printf("free_predefined_helper: %d of 2 frees failed\n", failed);
  MPI_Finalize();
  return 0;
}
