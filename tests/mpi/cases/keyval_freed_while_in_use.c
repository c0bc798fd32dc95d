// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Freeing a keyval while attributes use it is legal: the handle becomes MPI_KEYVAL_INVALID, but
 * the key lives on. A later MPI_Comm_dup still runs its copy callback, and MPI_Comm_free still
 * runs its delete callback, for the original and for the copy. The program never touches the
 * freed key itself again (that would be keyval.freed); it observes through the callbacks. */
#include <mpi.h>
#include <stdio.h>

static int copies = 0, deletes = 0;
static size_t copied_from = 0, deleted_values[4];

static int copy_cb(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval;
  ++copies;
  copied_from = (size_t)in;
  *(void**)out = (void*)((size_t)in + (size_t)extra);
  *flag = 1;
  return MPI_SUCCESS;
}

static int delete_cb(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  if (deletes < 4) deleted_values[deletes] = (size_t)value;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(copy_cb, delete_cb, &key, (void*)1000);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, key, (void*)7);
  MPI_Comm_free_keyval(&key);
  const int invalidated = key == MPI_KEYVAL_INVALID;

  /* A new key: must not be confused with the freed one still alive. */
  int other;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &other, NULL);
  MPI_Comm_set_attr(comm, other, (void*)5);

  MPI_Comm copy;
  MPI_Comm_dup(comm, &copy);
  void* got = NULL;
  int flag = 0;
  MPI_Comm_get_attr(copy, other, &got, &flag);
  const int other_ok = flag && got == (void*)5;
  MPI_Comm_free(&copy);
  const int deletes_after_copy = deletes;
  const size_t first_deleted = deleted_values[0];
  MPI_Comm_free(&comm);
  const int deletes_after_original = deletes;
  MPI_Comm_free_keyval(&other);

  /* The freed key is gone now; a new key may get its number back (Open MPI reuses it) and must
   * work like any other. */
  int reused;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cb, &reused, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, reused, (void*)3);
  MPI_Comm_get_attr(MPI_COMM_WORLD, reused, &got, &flag);
  const int reused_ok = flag && got == (void*)3;
  MPI_Comm_delete_attr(MPI_COMM_WORLD, reused);
  MPI_Comm_get_attr(MPI_COMM_WORLD, reused, &got, &flag);
  const int reused_gone = !flag;
  MPI_Comm_free_keyval(&reused);

  if (rank == 0) {
    printf("keyval_freed_while_in_use: handle invalidated %d\n", invalidated);
    printf("keyval_freed_while_in_use: dup ran the copy callback %d time(s) on value %zu; other key copied %d\n",
           copies, copied_from, other_ok);
    printf("keyval_freed_while_in_use: freeing the copy ran %d delete callback(s) on value %zu\n",
           deletes_after_copy, first_deleted);
    printf("keyval_freed_while_in_use: freeing the original ran %d more on value %zu\n",
           deletes_after_original - deletes_after_copy,
           deleted_values[1]);
    printf("keyval_freed_while_in_use: a new key afterwards: read %d, deleted %d (delete callbacks in all %d, last on "
           "value %zu)\n",
           reused_ok, reused_gone, deletes, deleted_values[2]);
  }
  MPI_Finalize();
  return 0;
}
