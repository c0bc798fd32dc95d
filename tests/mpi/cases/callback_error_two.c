// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.error
// divergence: comm-free-drops-attributes-on-failed-delete
// clean
// exit: 0
/* Two attributes, and the delete callback that runs first (the newer attribute's) fails once.
 * By the standard MPI_Comm_free then fails (Open MPI stops at that callback and keeps both
 * attributes). MPICH runs the other callback too, drops both attributes and succeeds, because
 * the last callback it ran succeeded: a known divergence, after which shadow mode follows it.
 * Either way the program ends with the communicator freed and every callback run once. */
#include <mpi.h>
#include <stdio.h>

static int calls = 0, failed = 0;

static int failing_once(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++calls;
  if (!failed) {
    failed = 1;
    return MPI_ERR_OTHER; /* BUG the first time */
  }
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int older, newer;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_once, &older, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_once, &newer, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_attr(comm, older, (void*)1);
  MPI_Comm_set_attr(comm, newer, (void*)2);

  int frees = 1;
  if (MPI_Comm_free(&comm) != MPI_SUCCESS && comm != MPI_COMM_NULL) {
    ++frees;
    MPI_Comm_free(&comm);
  }
  MPI_Comm_free_keyval(&older);
  MPI_Comm_free_keyval(&newer);
  if (rank == 0) printf("callback_error_two: freed after %d call(s), communicator null %d\n", frees, comm == MPI_COMM_NULL);
  MPI_Finalize();
  return 0;
}
