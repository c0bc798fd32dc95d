// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.bad-flag
// clean
// exit: 0
/* callback.bad-flag: a copy callback sets *flag = 7 (neither 0 nor 1). Whether the attribute is
 * then copied is undefined, so the program does not depend on it (no user delete callback, no
 * read of the copy). */
#include <mpi.h>
#include <stdio.h>

static int copies = 0;

static int bad_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = in;
  *flag = 7; /* BUG */
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(bad_copy, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm comm, copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, key, (void*)11);
  MPI_Comm_dup(comm, &copy);
  MPI_Comm_free(&copy);
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key);

  if (rank == 0) printf("callback_bad_flag: copy callback ran %d time(s)\n", copies);
  MPI_Finalize();
  return 0;
}
