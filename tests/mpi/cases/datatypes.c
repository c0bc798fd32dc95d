// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Datatype attributes: keyvals on a derived datatype; MPI_Type_dup copies them with
 * MPI_TYPE_DUP_FN (same value), a user copy callback (new value) and MPI_TYPE_NULL_COPY_FN (not
 * copied); attributes on a predefined datatype (MPI_INT) are allowed; MPI_Type_free runs the
 * delete callbacks. */
#include <mpi.h>
#include <stdio.h>

static int copies = 0, deletes = 0;
static long deleted_sum = 0;

static int type_copy(MPI_Datatype type, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)type; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = (void*)((size_t)in + 100);
  *flag = 1;
  return MPI_SUCCESS;
}

static int type_delete(MPI_Datatype type, int keyval, void* value, void* extra) {
  (void)type; (void)keyval; (void)extra;
  ++deletes;
  deleted_sum += (long)(size_t)value;
  return MPI_SUCCESS;
}

static int value_of(MPI_Datatype t, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Type_get_attr(t, key, &v, &flag);
  return flag ? (int)(size_t)v : -1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int user_key, dup_key, null_key;
  MPI_Type_create_keyval(type_copy, type_delete, &user_key, NULL);
  MPI_Type_create_keyval(MPI_TYPE_DUP_FN, type_delete, &dup_key, NULL);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &null_key, NULL);

  /* A derived datatype. */
  MPI_Datatype vec;
  MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &vec);
  MPI_Type_commit(&vec);
  MPI_Type_set_attr(vec, user_key, (void*)1);
  MPI_Type_set_attr(vec, dup_key, (void*)2);
  MPI_Type_set_attr(vec, null_key, (void*)3);
  if (rank == 0)
    printf("datatypes: vector: user %d, dup %d, null %d\n", value_of(vec, user_key), value_of(vec, dup_key),
           value_of(vec, null_key));

  MPI_Datatype vec2;
  MPI_Type_dup(vec, &vec2);
  if (rank == 0)
    printf("datatypes: dup of vector: user %d, dup %d, null %d, copy callbacks %d\n", value_of(vec2, user_key),
           value_of(vec2, dup_key), value_of(vec2, null_key), copies);

  /* The duplicate is a working datatype. */
  double data[12] = {0}, recv[12] = {0};
  for (int i = 0; i < 12; ++i) data[i] = i;
  MPI_Sendrecv(data, 1, vec2, 0, 0, recv, 1, vec, 0, 0, MPI_COMM_SELF, MPI_STATUS_IGNORE);
  const int moved = recv[0] == 0 && recv[1] == 1 && recv[4] == 4 && recv[9] == 9 && recv[2] == 0;

  /* The duplicate first: Open MPI keeps a datatype alive (and defers its delete callbacks) while
   * a duplicate made from it exists (see datatype_dup_deferred_delete.c). */
  MPI_Type_free(&vec2);
  const int after_dup = deletes;
  MPI_Type_free(&vec);
  if (rank == 0)
    printf("datatypes: sendrecv through the duplicate ok %d; delete callbacks after freeing the duplicate %d, "
           "after freeing the vector %d (values summed %ld)\n",
           moved, after_dup, deletes, deleted_sum);

  /* A predefined datatype: set, get, dup, delete are all allowed. */
  deletes = 0;
  deleted_sum = 0;
  MPI_Type_set_attr(MPI_INT, user_key, (void*)7);
  MPI_Type_set_attr(MPI_INT, dup_key, (void*)8);
  MPI_Datatype int2;
  MPI_Type_dup(MPI_INT, &int2);
  const int int_user = value_of(MPI_INT, user_key), int2_user = value_of(int2, user_key),
            int2_dup = value_of(int2, dup_key);
  MPI_Type_free(&int2);
  MPI_Type_delete_attr(MPI_INT, user_key);
  MPI_Type_delete_attr(MPI_INT, dup_key);
  const int int_after = value_of(MPI_INT, user_key);
  if (rank == 0)
    printf("datatypes: MPI_INT: user %d, its dup: user %d dup %d; after deletes %d, delete callbacks %d (values "
           "summed %ld)\n",
           int_user, int2_user, int2_dup, int_after, deletes, deleted_sum);

  MPI_Type_free_keyval(&user_key);
  MPI_Type_free_keyval(&dup_key);
  MPI_Type_free_keyval(&null_key);
  if (rank == 0)
    printf("datatypes: keyvals freed %d\n", user_key == MPI_KEYVAL_INVALID && dup_key == MPI_KEYVAL_INVALID);
  MPI_Finalize();
  return 0;
}
