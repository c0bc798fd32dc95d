// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.predefined
// clean
// exit: 0
/* keyval.predefined: MPI_Comm_set_attr with MPI_TAG_UB, and MPI_Comm_free_keyval on a copy of
 * MPI_TAG_UB. Reading it stays fine. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  static int fake_tag_ub = 7;
  int failures = 0;
  if (MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, &fake_tag_ub) != MPI_SUCCESS) ++failures; /* BUG */
  int copy = MPI_TAG_UB;
  if (MPI_Comm_free_keyval(&copy) != MPI_SUCCESS) ++failures; /* BUG */

  int* tag_ub = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  int intact = flag && tag_ub && *tag_ub >= 32767;

  if (rank == 0) printf("keyval_predefined: %d of 2 calls failed, MPI_TAG_UB intact %d\n", failures, intact);
  MPI_Finalize();
  return 0;
}
