// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.bad-flag
// clean
// exit: 0
/* callback.bad-flag, followed through: a copy callback sets *flag = 7, and the keyval has a user
 * delete callback. Whether such an attribute is copied is undefined (Open MPI copies only on
 * flag == 1, attrcheck's emulation on any non-zero flag), so the only finding should be
 * callback.bad-flag: reading the copy and freeing it must not be reported as an impl.divergence
 * in shadow mode. The program prints nothing that depends on the choice. */
#include <mpi.h>
#include <stdio.h>

static int copies = 0, deletes = 0;

static int bad_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = in;
  *flag = 7; /* BUG */
  return MPI_SUCCESS;
}

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(bad_copy, count_delete, &key, NULL);
  MPI_Comm comm, copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, key, (void*)11);
  MPI_Comm_dup(comm, &copy);
  void* got = NULL;
  int flag = 0;
  MPI_Comm_get_attr(copy, key, &got, &flag);
  const int consistent = !flag || got == (void*)11;
  MPI_Comm_free(&copy);
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key);

  if (rank == 0)
    printf("callback_bad_flag_delete: copy callback ran %d time(s), copy consistent %d, delete callbacks %s\n",
           copies, consistent, deletes == 1 + flag ? "match" : "MISMATCH");
  MPI_Finalize();
  return 0;
}
