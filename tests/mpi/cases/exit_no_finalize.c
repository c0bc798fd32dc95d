// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.double-free
// clean
// exit: without-finalize
// expect-processes: 2
// expect-everywhere: keyval.double-free
/* The report is written when the program exits without MPI_Finalize: an erroneous call (a keyval
 * freed twice), then exit(0) on every rank. Open MPI's mpirun treats a process that exits without
 * calling MPI_Finalize as an abnormal termination and itself exits with status 1, although each
 * process returned 0; MPICH's Hydra kills the other ranks when one exits without MPI_Finalize and
 * exits with 0 or, now and then, 1, natively too: hence "exit: without-finalize" (the library
 * profile's exit_without_finalize). Either way every rank's finding is in the report. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)1);
  int saved = key;
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&saved); /* BUG: double free */

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    printf("exit_no_finalize: exiting without MPI_Finalize\n");
    fflush(stdout);
  }
  exit(0);
}
