// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Keyvals created after a long churn of creates and frees. In shadow mode such a create is handed
 * a library key held in the quarantine whose 4,096 later frees are over, as it is, without the
 * library's free and create (src/runtime/process/keyvals.cpp, docs/rules.md keyval.freed): the library
 * still holds that key with attrcheck's trampolines and the record the new keyval is made in. Each
 * new key must behave as a key of its own: its own copy and delete functions and extra_state, on
 * dup, on free and on delete, in the order the standard says. A key freed while its attribute is
 * still set must keep its callbacks through the whole churn (its library key cannot be handed
 * out while the library holds an attribute under it) and run them when that attribute goes.
 * Datatype keys are churned alongside, so a held comm key is never handed to a datatype create.
 * Every callback notes what it was called with; each phase prints its notes sorted (the order of
 * copies and deletes differs between libraries); the output must be the native run's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HOLD = 4096, BATCH = 512 };

static int failures = 0;

static char notes[16][64];
static int n_notes = 0;

static void note(const char* what, int extra, long value) {
  if (n_notes < 16) snprintf(notes[n_notes++], sizeof notes[0], "%s extra=%d value=%ld", what, extra, value);
  else ++failures;
}
static int by_text(const void* a, const void* b) { return strcmp((const char*)a, (const char*)b); }
static void print_notes(const char* phase) {
  qsort(notes, (size_t)n_notes, sizeof notes[0], by_text);
  printf("%s:\n", phase);
  for (int i = 0; i < n_notes; ++i) printf("  %s\n", notes[i]);
  n_notes = 0;
}

static int copy_a(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c, (void)k;
  note("copy_a", *(int*)extra, (long)(size_t)in);
  *(void**)out = (void*)((size_t)in + 1);
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_a(MPI_Comm c, int k, void* value, void* extra) {
  (void)c, (void)k;
  note("delete_a", *(int*)extra, (long)(size_t)value);
  return MPI_SUCCESS;
}
static int copy_b(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c, (void)k, (void)out;
  note("copy_b (not copied)", *(int*)extra, (long)(size_t)in);
  *flag = 0;
  return MPI_SUCCESS;
}
static int delete_b(MPI_Comm c, int k, void* value, void* extra) {
  (void)c, (void)k;
  note("delete_b", *(int*)extra, (long)(size_t)value);
  return MPI_SUCCESS;
}
static int type_delete(MPI_Datatype t, int k, void* value, void* extra) {
  (void)t, (void)k, (void)value, (void)extra;
  return MPI_SUCCESS;
}

static int churn_extra = 0;

/* n comm keys (with user callbacks, so their library keys carry the trampolines) and n datatype
 * keys, created and freed one at a time. */
static void churn(int n) {
  for (int i = 0; i < n; ++i) {
    int k;
    if (MPI_Comm_create_keyval(copy_a, delete_a, &k, &churn_extra) != MPI_SUCCESS || MPI_Comm_free_keyval(&k) != MPI_SUCCESS)
      ++failures;
    if (MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &k, NULL) != MPI_SUCCESS ||
        MPI_Type_free_keyval(&k) != MPI_SUCCESS)
      ++failures;
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  static int extra_in_use = 1, extra_a = 2, extra_b = 3, extra_c = 4;

  /* A key freed while its attribute is set on `held`: alive through the attribute. */
  MPI_Comm held;
  MPI_Comm_dup(MPI_COMM_WORLD, &held);
  int in_use;
  MPI_Comm_create_keyval(copy_a, delete_a, &in_use, &extra_in_use);
  MPI_Comm_set_attr(held, in_use, (void*)77);
  MPI_Comm_free_keyval(&in_use);

  churn(2 * (HOLD + BATCH));  /* in shadow mode, past the quarantine: held keys are handed out again */

  /* New keys, each with callbacks and extra_state of its own. */
  int a, b, c;
  if (MPI_Comm_create_keyval(copy_a, delete_a, &a, &extra_a) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_create_keyval(copy_b, delete_b, &b, &extra_b) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_create_keyval(copy_a, delete_b, &c, &extra_c) != MPI_SUCCESS) ++failures;
  if (a == b || b == c || a == c) ++failures;
  MPI_Comm_set_attr(MPI_COMM_WORLD, a, (void*)10);
  MPI_Comm_set_attr(MPI_COMM_WORLD, b, (void*)20);
  MPI_Comm_set_attr(MPI_COMM_WORLD, c, (void*)30);

  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  print_notes("dup of world");
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(dup, a, &v, &flag);
  printf("dup: a flag=%d value=%ld\n", flag, flag ? (long)(size_t)v : -1L);
  MPI_Comm_get_attr(dup, b, &v, &flag);
  printf("dup: b flag=%d\n", flag);
  MPI_Comm_get_attr(dup, c, &v, &flag);
  printf("dup: c flag=%d value=%ld\n", flag, flag ? (long)(size_t)v : -1L);
  MPI_Comm_free(&dup);
  print_notes("free of the dup");

  MPI_Comm_set_attr(MPI_COMM_WORLD, a, (void*)11);
  print_notes("replace on world");
  MPI_Comm_delete_attr(MPI_COMM_WORLD, a);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, b);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, c);
  print_notes("delete on world");

  /* The key freed at the start, in use all along, still has its callbacks. */
  MPI_Comm held_dup;
  MPI_Comm_dup(held, &held_dup);
  MPI_Comm_free(&held_dup);
  MPI_Comm_free(&held);
  print_notes("dup and free of held");

  MPI_Comm_free_keyval(&a);
  MPI_Comm_free_keyval(&b);
  MPI_Comm_free_keyval(&c);
  churn(HOLD + BATCH);  /* and once more, with the keys above in the quarantine */
  printf("failures %d\n", failures);
  MPI_Finalize();
  return failures != 0;
}
