// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.double-free
// clean
// exit: nonzero
/* Only rank 1 makes an erroneous call (a keyval freed twice); then rank 0 calls MPI_Abort while
 * rank 1 waits in MPI_Recv. mpirun then terminates rank 1 (SIGTERM, later SIGKILL): rank 1's
 * report, which holds the only finding, must still be written. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  if (rank == 1) {
    int key;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
    int saved = key;
    MPI_Comm_free_keyval(&key);
    MPI_Comm_free_keyval(&saved); /* BUG: double free */
  }

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    printf("abort_one_rank: rank 0 calls MPI_Abort\n");
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  int never = 0;
  MPI_Recv(&never, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
