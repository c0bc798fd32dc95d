// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Copy and delete semantics: on MPI_Comm_dup a copy callback returning flag 0 copies nothing,
 * flag 1 copies the new value it produced, MPI_COMM_DUP_FN copies the value as it is; MPI_Comm_free
 * runs the delete callback of every attribute (listed here in key order: the standard fixes no
 * order for a free); MPI_Finalize deletes MPI_COMM_SELF's attributes newest first, which the
 * callbacks print as they run. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int rank;
static int k_decline, k_times_ten, k_dup;
static int deleted[3][100]; /* per key index, by value */

static int key_index(int keyval) {
  return keyval == k_decline ? 0 : keyval == k_times_ten ? 1 : keyval == k_dup ? 2 : -1;
}

static int decline(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra; (void)in;
  *(void**)out = (void*)99; /* ignored: flag 0 */
  *flag = 0;
  return MPI_SUCCESS;
}

static int times_ten(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  *(void**)out = (void*)((size_t)in * 10);
  *flag = 1;
  return MPI_SUCCESS;
}

static int record_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)extra;
  const int i = key_index(keyval);
  if (i >= 0 && (size_t)value < 100) ++deleted[i][(size_t)value];
  return MPI_SUCCESS;
}

static void print_deleted(const char* when) {
  if (rank != 0) return;
  printf("copy_and_delete_order: %s deleted:", when);
  static const char* names[] = {"decline", "times_ten", "dup_fn"};
  for (int i = 0; i < 3; ++i)
    for (int v = 0; v < 100; ++v)
      if (deleted[i][v]) printf(" %s=%d(x%d)", names[i], v, deleted[i][v]);
  printf("\n");
  for (int i = 0; i < 3; ++i)
    for (int v = 0; v < 100; ++v) deleted[i][v] = 0;
}

static int value_of(MPI_Comm c, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(c, key, &v, &flag);
  return flag ? (int)(size_t)v : -1;
}

static int self_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)extra;
  int finalized = 1;
  MPI_Finalized(&finalized);
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (rank == 0) printf("copy_and_delete_order: at finalize: %s (finalized %d, self size %d)\n", (const char*)value,
                        finalized, size);
  fflush(stdout);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  MPI_Comm_create_keyval(decline, record_delete, &k_decline, NULL);
  MPI_Comm_create_keyval(times_ten, record_delete, &k_times_ten, NULL);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, record_delete, &k_dup, NULL);

  MPI_Comm comm, copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, k_decline, (void*)1);
  MPI_Comm_set_attr(comm, k_times_ten, (void*)2);
  MPI_Comm_set_attr(comm, k_dup, (void*)3);
  MPI_Comm_dup(comm, &copy);
  if (rank == 0)
    printf("copy_and_delete_order: copy: decline %d, times_ten %d, dup_fn %d; original: %d %d %d\n",
           value_of(copy, k_decline), value_of(copy, k_times_ten), value_of(copy, k_dup), value_of(comm, k_decline),
           value_of(comm, k_times_ten), value_of(comm, k_dup));
  print_deleted("before any free");
  MPI_Comm_free(&copy);
  print_deleted("MPI_Comm_free(copy)");
  MPI_Comm_set_attr(comm, k_dup, (void*)4); /* replace: the old value's delete callback runs */
  print_deleted("replacing dup_fn 3 by 4");
  MPI_Comm_delete_attr(comm, k_decline);
  print_deleted("MPI_Comm_delete_attr(decline)");
  MPI_Comm_free(&comm);
  print_deleted("MPI_Comm_free(original)");
  MPI_Comm_free_keyval(&k_decline);
  MPI_Comm_free_keyval(&k_times_ten);
  MPI_Comm_free_keyval(&k_dup);

  /* MPI_COMM_SELF: set first, second, third; MPI_Finalize deletes third, second, first. */
  static const char* const labels[] = {"first set", "second set", "third set"};
  for (int i = 0; i < 3; ++i) {
    int key;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &key, NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)labels[i]);
    MPI_Comm_free_keyval(&key);
  }
  if (rank == 0) printf("copy_and_delete_order: calling MPI_Finalize\n");
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
