// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Window attributes: the predefined MPI_WIN_BASE, MPI_WIN_SIZE, MPI_WIN_DISP_UNIT,
 * MPI_WIN_CREATE_FLAVOR and MPI_WIN_MODEL on windows from MPI_Win_create, MPI_Win_allocate and
 * MPI_Win_create_dynamic, and a user window keyval: set, get, replace, delete, and a delete
 * callback run by MPI_Win_free.
 * (Needs OMPI_MCA_osc=^ucx in this container.) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int deletes = 0;
static long deleted_sum = 0;

static int win_delete(MPI_Win win, int keyval, void* value, void* extra) {
  (void)win; (void)keyval;
  ++deletes;
  deleted_sum += (long)(size_t)value;
  if (extra != (void*)&deletes) return MPI_ERR_OTHER;
  return MPI_SUCCESS;
}

static int check_predefined(MPI_Win win, void* want_base, MPI_Aint want_size, int want_disp, int want_flavor,
                            const char* what, int rank) {
  int ok = 1, flag = 0;
  void* base = NULL;
  MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag);
  ok &= flag && base == want_base;
  MPI_Aint* size = NULL;
  MPI_Win_get_attr(win, MPI_WIN_SIZE, &size, &flag);
  ok &= flag && *size == want_size;
  int* disp = NULL;
  MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &disp, &flag);
  ok &= flag && *disp == want_disp;
  int* flavor = NULL;
  MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
  ok &= flag && *flavor == want_flavor;
  int* model = NULL;
  MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag);
  ok &= flag && (*model == MPI_WIN_UNIFIED || *model == MPI_WIN_SEPARATE);
  if (rank == 0)
    printf("windows: %s: base ok, size %ld, disp_unit %d, flavor %s, model known: %s\n", what, (long)*size, *disp,
           *flavor == MPI_WIN_FLAVOR_CREATE     ? "create"
           : *flavor == MPI_WIN_FLAVOR_ALLOCATE ? "allocate"
           : *flavor == MPI_WIN_FLAVOR_DYNAMIC  ? "dynamic"
                                                : "?",
           ok ? "all ok" : "MISMATCH");
  return ok;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  /* MPI_Win_create on a user buffer. */
  int* buffer = malloc(10 * sizeof *buffer);
  MPI_Win created;
  MPI_Win_create(buffer, 10 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &created);
  check_predefined(created, buffer, 10 * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_CREATE, "MPI_Win_create", rank);

  /* MPI_Win_allocate. */
  double* mem = NULL;
  MPI_Win allocated;
  MPI_Win_allocate(16 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &allocated);
  check_predefined(allocated, mem, 16 * sizeof(double), sizeof(double), MPI_WIN_FLAVOR_ALLOCATE, "MPI_Win_allocate",
                   rank);

  /* MPI_Win_create_dynamic: no memory attached, base MPI_BOTTOM, size 0. */
  MPI_Win dynamic;
  MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &dynamic);
  check_predefined(dynamic, MPI_BOTTOM, 0, 1, MPI_WIN_FLAVOR_DYNAMIC,
                   "MPI_Win_create_dynamic", rank);
  MPI_Win_free(&dynamic);

  /* A user keyval, plus the predefined callbacks. */
  int key, plain_key;
  MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_delete, &key, &deletes);
  MPI_Win_create_keyval(MPI_WIN_DUP_FN, MPI_WIN_NULL_DELETE_FN, &plain_key, NULL);
  MPI_Win_set_attr(created, key, (void*)1);
  MPI_Win_set_attr(created, key, (void*)2); /* replaces: the delete callback runs for 1 */
  MPI_Win_set_attr(allocated, key, (void*)10);
  MPI_Win_set_attr(allocated, plain_key, (void*)20);
  void* got = NULL;
  int flag = 0;
  MPI_Win_get_attr(created, key, &got, &flag);
  const int read_created = flag && got == (void*)2;
  MPI_Win_get_attr(allocated, plain_key, &got, &flag);
  const int read_plain = flag && got == (void*)20;
  const int deletes_before_free = deletes;
  MPI_Win_delete_attr(allocated, plain_key);
  MPI_Win_get_attr(allocated, plain_key, &got, &flag);
  const int plain_gone = !flag;

  MPI_Win_fence(0, created);
  MPI_Win_fence(0, created);
  MPI_Win_free(&created);    /* runs win_delete for 2 */
  MPI_Win_free(&allocated);  /* runs win_delete for 10 */
  MPI_Win_free_keyval(&key);
  MPI_Win_free_keyval(&plain_key);
  free(buffer);

  if (rank == 0) {
    printf("windows: user key: read %d, replace ran %d delete callback(s), plain key read %d, deleted %d\n",
           read_created, deletes_before_free, read_plain, plain_gone);
    printf("windows: after MPI_Win_free: %d delete callbacks, values summed %ld, handles null %d\n", deletes,
           deleted_sum, created == MPI_WIN_NULL && allocated == MPI_WIN_NULL);
  }
  MPI_Finalize();
  return 0;
}
