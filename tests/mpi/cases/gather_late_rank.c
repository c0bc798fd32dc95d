// attrcheck-test: np=3 modes=shadow,emulate
// env: ATTRCHECK_GATHER_TIMEOUT=1
// expect: keyval.double-free
// clean
// expect-count: keyval.double-free 3
// expect-ranks: keyval.double-free 0,1,2
// expect-processes: 3
// status: finalized
// expect-files: report.json
/* A rank that comes to MPI_Finalize after the others have given up waiting for it (the gather's
 * deadline, ATTRCHECK_GATHER_TIMEOUT, is 1 s here; rank 2 comes 4 s late): the others gather
 * without it and rank 0 writes the job's report; rank 2, never told its findings are in it,
 * writes its own, and the launcher merges the two into one report.json. Nobody hangs, and every
 * rank's finding is in it once. */
#include <mpi.h>
#include <stddef.h>
#include <unistd.h>

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
  if (rank == 2) sleep(4);
  MPI_Finalize();
  return 0;
}
