// attrcheck-test: np=2 modes=shadow,emulate
// expect: lifecycle.before-init
// clean
// exit: 0
/* lifecycle.before-init: MPI_Comm_create_keyval before MPI_Init. (Natively Open MPI aborts here;
 * under the tool the call is refused with an error code and the program goes on.) */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int early = MPI_KEYVAL_INVALID;
  const int rc = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &early, NULL); /* BUG */

  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rc == MPI_SUCCESS && early != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&early);
  if (rank == 0) printf("lifecycle_before_init: early create failed %d\n", rc != MPI_SUCCESS);
  MPI_Finalize();
  return 0;
}
