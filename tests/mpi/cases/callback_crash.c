// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.crash
// expect-at: callback.crash callback_crash.c:16
// expect-at: callback.crash callback_crash.c:34
// clean
// exit: signal
/* callback.crash: a delete callback dereferences NULL during MPI_Comm_free. The report must name
 * the callback and survive the crash, with the stack from the faulting statement (line 16) to the
 * MPI_Comm_free that ran the callback (34). */
#include <mpi.h>
#include <stdio.h>

static int crashing_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  volatile int* p = (volatile int*)value; /* NULL */
  *p = 1; /* BUG: SIGSEGV */
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, crashing_delete, &key, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, key, NULL);
  if (rank == 0) {
    printf("callback_crash: freeing\n");
    fflush(stdout);
  }
  MPI_Comm_free(&comm);

  if (rank == 0) printf("callback_crash: not reached\n");
  MPI_Finalize();
  return 0;
}
