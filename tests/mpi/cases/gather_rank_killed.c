// attrcheck-test: np=3 modes=shadow,emulate
// expect: keyval.double-free
// clean
// expect-count: keyval.double-free 3
// expect-ranks: keyval.double-free 0,1,2
// exit: nonzero
// expect-files: report.json
/* Rank 2 is killed without warning (SIGKILL) after its finding, while the others are in
 * MPI_Finalize gathering the job's report: its finding is in the merged report all the same (its
 * journal, made by that finding), and what the others found too, whatever the MPI launcher then
 * does to them. The launcher leaves one report.json: the journals are in it. */
#include <mpi.h>
#include <stddef.h>
#include <signal.h>

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
  if (rank == 2) raise(SIGKILL);
  MPI_Finalize();
  return 0;
}
