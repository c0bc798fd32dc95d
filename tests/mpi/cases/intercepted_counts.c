// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// expect-intercepted: keyval.c=8 attribute.c=12 object.c=8 callback.c=10 keyval.fortran=0 attribute.f08=0
/* The report says what attrcheck checked: exactly the keyval, attribute and object calls this
 * program makes and the callbacks it has run, per rank (2 ranks: the merged report doubles them).
 * Per rank: 4 keyval calls (2 creates, 2 frees), 6 attribute calls (3 sets, 2 gets, 1 delete),
 * 4 object calls (a dup, a contiguous datatype, 2 frees) and 5 callbacks (the set that replaces a
 * value runs its delete callback, the dup one copy callback, the two frees and the delete one
 * delete callback each). */
#include <mpi.h>
#include <stdio.h>

static int copy_fn(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void* value, void* extra) {
  (void)c; (void)k; (void)value; (void)extra;
  return MPI_SUCCESS;
}
static int type_delete(MPI_Datatype t, int k, void* value, void* extra) {
  (void)t; (void)k; (void)value; (void)extra;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, key, type_key, flag;
  void* value;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &type_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)1);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)2); /* runs the delete callback of 1 */
  MPI_Comm_get_attr(MPI_COMM_SELF, key, &value, &flag);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_SELF, &dup); /* runs the copy callback */
  MPI_Comm_get_attr(dup, key, &value, &flag);
  MPI_Datatype t;
  MPI_Type_contiguous(2, MPI_INT, &t);
  MPI_Type_set_attr(t, type_key, (void*)3);
  MPI_Type_free(&t);   /* runs the datatype's delete callback */
  MPI_Comm_free(&dup); /* runs the copy's delete callback */
  MPI_Comm_delete_attr(MPI_COMM_SELF, key); /* runs the delete callback of 2 */
  MPI_Comm_free_keyval(&key);
  MPI_Type_free_keyval(&type_key);
  if (rank == 0) printf("intercepted_counts: done\n");
  MPI_Finalize();
  return 0;
}
