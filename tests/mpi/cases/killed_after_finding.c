// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.double-free keyval.kind-mismatch
// clean
// exit: nonzero
// status: running
/* A process killed without warning (SIGKILL: what Hydra sends the other ranks after an
 * MPI_Abort, and the OOM killer or a batch system's time limit) runs no handler: its findings must
 * already be on disk. Every rank makes two erroneous calls and then kills itself with SIGKILL:
 * the merged report must hold both findings, rebuilt from the ranks' journals (their status:
 * "running", they never wrote a report). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  int saved = key;
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&saved); /* BUG: double free */

  int type_key;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &type_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, type_key, NULL); /* BUG: a datatype keyval on a communicator */

  MPI_Barrier(MPI_COMM_WORLD);
  printf("killed_after_finding: rank kills itself\n");
  fflush(stdout);
  raise(SIGKILL);
  MPI_Finalize();
  return 0;
}
