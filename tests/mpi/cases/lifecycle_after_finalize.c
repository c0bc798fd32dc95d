// attrcheck-test: np=2 modes=shadow,emulate
// expect: lifecycle.after-finalize
// clean
// exit: 0
/* lifecycle.after-finalize: MPI_Comm_create_keyval after MPI_Finalize. (Natively Open MPI aborts
 * here; under the tool the call is refused with an error code.) */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Finalize();

  int late = MPI_KEYVAL_INVALID;
  const int rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &late, NULL); /* BUG */
  if (rank == 0) printf("lifecycle_after_finalize: late create failed %d\n", rc != MPI_SUCCESS);
  return 0;
}
