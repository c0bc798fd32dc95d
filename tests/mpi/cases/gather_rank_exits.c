// attrcheck-test: np=3 modes=shadow,emulate
// expect: keyval.double-free
// clean
// expect-count: keyval.double-free 3
// expect-ranks: keyval.double-free 0,1,2
// exit: any
// expect-files: report.json
/* Rank 2 exits without MPI_Finalize while the others are in it, gathering the job's report and
 * waiting for rank 2's findings: nobody hangs (the gather waits no longer than its deadline, and
 * the MPI launcher ends the job: Open MPI's mpirun stops the other ranks, MPICH's Hydra kills
 * them), and every rank's finding is in the one report.json all the same (rank 2's report,
 * written at exit; the others' gathered report, their own reports or their journals). How the
 * MPI launcher ends varies natively: MPICH 4.0.2's Hydra exits 0 or 9 from run to run. */
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
