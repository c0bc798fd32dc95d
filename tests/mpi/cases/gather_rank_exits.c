// attrcheck-test: np=3 modes=shadow,emulate
// expect: keyval.double-free
// clean
// expect-count: keyval.double-free 3
// expect-ranks: keyval.double-free 0,1,2
// exit: any
// expect-files: report.json
// gathered-left: 2
// hangs-on mpich-5.0: MPICH 5.0's Hydra, now and then, neither kills the other ranks nor lets their MPI_Finalize finish (blocked in a PMI read), natively too when they reach it a moment after rank 2 exited (2 of 30 native runs with a 2-second delay)
/* Rank 2 exits without MPI_Finalize while the others are in it, gathering the job's report:
 * every rank's finding is in the one report.json all the same (rank 2's report,
 * written at exit; the others' gathered report, their own reports or their journals). The gather
 * does not wait for rank 2 to its deadline: rank 2's report says it ended, and where rank 0 gets
 * to write the gathered report (the MPI launcher may end the job first: Open MPI's mpirun stops
 * the other ranks, MPICH's Hydra kills them, or lets them finalize), it says it did not wait for
 * rank 2. How the MPI launcher ends varies natively: MPICH's Hydra exits 0 or 9 from run to run,
 * and MPICH 5.0's may leave the job hanging (hangs-on): the report is whole after the job is
 * ended all the same. */
#include <mpi.h>
#include <stddef.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  int saved = key;
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&saved); /* BUG: a double free, on every rank */
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 2) exit(0);
  MPI_Finalize();
  return 0;
}
