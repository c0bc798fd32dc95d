// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_Type_get_contents returns the datatypes a derived type was built from, and "the user is
 * responsible for freeing these datatypes" (MPI-4.0 5.1.13). Open MPI and MPICH return the inner
 * type's own object with its reference count raised, so the handle equals the one the user made,
 * whether the user still holds it or already freed it (PETSc's MPIPetsc_Type_unwrap and mpi4py's
 * dtlib both free what it returns). Every free here is legal and must succeed; the inner type's
 * attribute must survive the frees of the extra references. */
#include <mpi.h>
#include <stdio.h>

static int deletes = 0;
static int type_delete(MPI_Datatype t, int k, void* v, void* e) {
  (void)t; (void)k; (void)v; (void)e;
  ++deletes;
  return MPI_SUCCESS;
}

/* Frees every derived datatype get_contents returns for `outer`, as PETSc does. */
static int unwrap_and_free(MPI_Datatype outer, MPI_Datatype* inner_out) {
  int ni, na, nd, combiner, failures = 0;
  MPI_Type_get_envelope(outer, &ni, &na, &nd, &combiner);
  int ints[8];
  MPI_Aint addrs[8];
  MPI_Datatype types[4];
  if (MPI_Type_get_contents(outer, ni, na, nd, ints, addrs, types) != MPI_SUCCESS) ++failures;
  for (int i = 0; i < nd; ++i) {
    int n2, a2, d2, c2;
    MPI_Type_get_envelope(types[i], &n2, &a2, &d2, &c2);
    if (inner_out) *inner_out = types[i];
    if (c2 != MPI_COMBINER_NAMED && MPI_Type_free(&types[i]) != MPI_SUCCESS) ++failures;
  }
  return failures;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int failures = 0;

  /* The reproducer: the inner type freed first, then unwrapped again and again. */
  MPI_Datatype v1, v2;
  MPI_Type_contiguous(2, MPI_INT, &v1);
  MPI_Type_vector(3, 1, 2, v1, &v2);
  MPI_Type_free(&v1);
  for (int i = 0; i < 5; ++i) failures += unwrap_and_free(v2, NULL);
  MPI_Type_free(&v2);

  /* The inner type still held by the user, with an attribute: the returned handle is the same
   * object; freeing it drops one reference, and the attribute is still there afterwards. */
  int key;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &key, NULL);
  MPI_Datatype inner, outer, got = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(4, MPI_DOUBLE, &inner);
  MPI_Type_set_attr(inner, key, (void*)42);
  MPI_Type_contiguous(2, inner, &outer);
  failures += unwrap_and_free(outer, &got);
  failures += unwrap_and_free(outer, NULL);
  void* value = NULL;
  int flag = 0;
  if (MPI_Type_get_attr(inner, key, &value, &flag) != MPI_SUCCESS || !flag || value != (void*)42) ++failures;
  MPI_Type_free(&outer);
  if (MPI_Type_free(&inner) != MPI_SUCCESS) ++failures;
  MPI_Type_free_keyval(&key);

  /* A struct of a predefined and a derived type: only the derived one is freed. */
  MPI_Datatype pair, s;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  int lens[2] = {1, 1};
  MPI_Aint disps[2] = {0, 16};
  MPI_Datatype members[2] = {MPI_DOUBLE, pair};
  MPI_Type_create_struct(2, lens, disps, members, &s);
  MPI_Type_free(&pair);
  for (int i = 0; i < 3; ++i) failures += unwrap_and_free(s, NULL);
  MPI_Type_free(&s);

  printf("get_contents frees: %d failures, delete callbacks ran %d time(s)\n", failures, deletes);
  MPI_Finalize();
  return 0;
}
