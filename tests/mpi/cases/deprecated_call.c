// attrcheck-test: np=2 modes=shadow,emulate
// expect: deprecated.call
// clean
// exit: 0
/* deprecated.call: the MPI-1 attribute interface (MPI_Keyval_create, MPI_Attr_put, MPI_Attr_get,
 * MPI_Attr_delete, MPI_Keyval_free), used correctly and with user callbacks (no deprecated
 * constants). */
#include <mpi.h>
#include <stdio.h>

static int deletes = 0;

static int old_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int old_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Keyval_create(old_copy, old_delete, &key, NULL);          /* deprecated */
  MPI_Attr_put(MPI_COMM_WORLD, key, (void*)99);                 /* deprecated */
  void* got = NULL;
  int flag = 0;
  MPI_Attr_get(MPI_COMM_WORLD, key, &got, &flag);               /* deprecated */
  const int read_ok = flag && got == (void*)99;
  MPI_Attr_delete(MPI_COMM_WORLD, key);                         /* deprecated */
  MPI_Keyval_free(&key);                                        /* deprecated */

  if (rank == 0) printf("deprecated_call: read ok %d, delete callbacks %d, key invalidated %d\n", read_ok, deletes,
                        key == MPI_KEYVAL_INVALID);
  MPI_Finalize();
  return 0;
}
