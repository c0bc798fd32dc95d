// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.double-free
// clean
// exit: nonzero
/* The report is written when the program calls MPI_Abort after an erroneous call (a keyval freed
 * twice). Every rank aborts, so the job's exit status is MPI_Abort's error code (3). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  int saved = key;
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&saved); /* BUG: double free */

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    printf("abort: calling MPI_Abort\n");
    fflush(stdout);
  }
  MPI_Abort(MPI_COMM_WORLD, 3);
  return 0;
}
