// attrcheck-test: np=4 modes=shadow,emulate
// expect: keyval.double-free
// clean
// expect-count: keyval.double-free 2
// expect-ranks: keyval.double-free 1,3
// expect-processes: 4
// status: finalized
// expect-files: report.json
// expect-created: report.json rank-1.journal rank-3.journal
/* The job's report is gathered over MPI at MPI_Finalize: two of four ranks free a keyval twice,
 * and the run leaves one file, report.json, with the finding on exactly those two ranks. Only
 * those two ranks create a file of their own: the journal their finding starts (a rank killed
 * later would leave its findings there), gone once the findings are in the job's report. */
#include <mpi.h>
#include <stddef.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  int saved = key;
  MPI_Comm_free_keyval(&key);
  if (rank % 2 == 1) MPI_Comm_free_keyval(&saved); /* BUG on ranks 1 and 3: a double free */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
