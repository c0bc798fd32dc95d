/* attrcheck's library probe: asks the MPI library it runs on, natively (without attrcheck), what it
 * does where libraries are known to differ in attribute caching, and prints one answer per line:
 *
 *   library-version TEXT          the first line of MPI_Get_library_version
 *   error-class SITUATION CLASS   the error class the library returns for an erroneous call
 *   divergence ID yes|no          whether it departs from the standard in the way ID names
 *   behaviour ID yes|no           what it does where the standard leaves it open
 *
 * Each ID is an entry of the library profiles (src/runtime/profile/mpi_profile.def); `attrcheck
 * --probe-library` runs this program and prints where the answers differ from the profile of the
 * library version at hand. Run with 2 processes (the intercommunicator questions need two); only
 * rank 0 prints. The answers about MPI_Finalize are printed after it returns. Every question cleans
 * up after itself, so that the next one starts from a library in a known state.
 *
 * With the argument --abort-questions it asks only the questions whose answer may be that the
 * library aborts the process: before each it prints `asking error-class SITUATION`, so that a run
 * that dies there answers "abort" (probe.cpp). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int rank, size;

static void answer(const char* what, const char* id, int yes) {
  if (rank == 0) printf("%s %s %s\n", what, id, yes ? "yes" : "no");
}

/* ---- error classes ---------------------------------------------------------------------------- */

static void error_class(const char* situation, int rc) {
  int cls = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  const char* name = cls == MPI_SUCCESS ? "MPI_SUCCESS" : cls == MPI_ERR_KEYVAL ? "MPI_ERR_KEYVAL"
                   : cls == MPI_ERR_OTHER ? "MPI_ERR_OTHER" : cls == MPI_ERR_ARG ? "MPI_ERR_ARG"
                   : cls == MPI_ERR_COMM ? "MPI_ERR_COMM" : cls == MPI_ERR_INTERN ? "MPI_ERR_INTERN" : "another";
  if (rank == 0) printf("error-class %s %s\n", situation, name);
  fflush(stdout);
}

static void probe_error_classes(void) {
  void* v = NULL;
  int flag = 0, key, type_key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &type_key, NULL);
  error_class("get-keyval-invalid", MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, &v, &flag));
  error_class("set-unknown-keyval", MPI_Comm_set_attr(MPI_COMM_WORLD, 12345, v));
  error_class("get-other-kind-keyval", MPI_Comm_get_attr(MPI_COMM_WORLD, type_key, &v, &flag));
  error_class("set-other-kind-keyval", MPI_Comm_set_attr(MPI_COMM_WORLD, type_key, v));
  error_class("set-predefined-keyval", MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, v));
  error_class("delete-absent-attribute", MPI_Comm_delete_attr(MPI_COMM_WORLD, key));
  int saved = key;
  MPI_Comm_free_keyval(&key);
  error_class("free-keyval-twice", MPI_Comm_free_keyval(&saved));
  int null_key = MPI_KEYVAL_INVALID;
  error_class("create-keyval-null-callbacks", MPI_Comm_create_keyval(NULL, NULL, &null_key, NULL));
  if (null_key != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&null_key);
  MPI_Type_free_keyval(&type_key);
}

/* ---- constructors: which ones copy attributes (the standard: only the dup family does) ---------- */

static int copies;  /* copy callbacks run */

static int counting_copy(MPI_Comm old, int key, void* extra, void* in, void* out, int* flag) {
  (void)old; (void)key; (void)extra;
  ++copies;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

/* Whether making `made` from a communicator carrying `key` copied it: a copy callback ran, or the
 * attribute is there. */
static int copied(MPI_Comm made, int key, int copies_before) {
  int flag = 0;
  void* v = NULL;
  if (made != MPI_COMM_NULL) MPI_Comm_get_attr(made, key, &v, &flag);
  return flag || copies != copies_before;
}

static void release(MPI_Comm* c) {
  if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

static void probe_constructors(void) {
  int key;
  MPI_Comm_create_keyval(counting_copy, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm base;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  MPI_Comm_set_attr(base, key, (void*)&key);
  MPI_Group group;
  MPI_Comm_group(base, &group);
  MPI_Comm made;
  int before;

  before = copies;
  MPI_Comm_split(base, 0, rank, &made);
  answer("divergence", "comm-split-copies-attributes", copied(made, key, before));
  release(&made);

  before = copies;
  MPI_Comm_split_type(base, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &made);
  answer("divergence", "comm-split-type-copies-attributes", copied(made, key, before));
  release(&made);

  before = copies;
  MPI_Comm_create(base, group, &made);
  answer("divergence", "comm-create-copies-attributes", copied(made, key, before));
  release(&made);

  before = copies;
  MPI_Comm_create_group(base, group, 7, &made);
  answer("divergence", "create-group-copies-attributes", copied(made, key, before));
  release(&made);

  int dims[1] = {size}, periods[1] = {0};
  before = copies;
  MPI_Cart_create(base, 1, dims, periods, 0, &made);
  answer("divergence", "cart-create-copies-attributes", copied(made, key, before));
  release(&made);

  int index[64], edges[64];
  for (int i = 0; i < size && i < 64; ++i) index[i] = 0;
  before = copies;
  MPI_Graph_create(base, size < 64 ? size : 64, index, edges, 0, &made);
  answer("divergence", "graph-create-copies-attributes", copied(made, key, before));
  release(&made);

  int none[1] = {0};
  before = copies;
  MPI_Dist_graph_create_adjacent(base, 0, none, none, 0, none, none, MPI_INFO_NULL, 0, &made);
  answer("divergence", "dist-graph-create-adjacent-copies-attributes", copied(made, key, before));
  release(&made);

  before = copies;
  MPI_Dist_graph_create(base, 0, none, none, none, none, MPI_INFO_NULL, 0, &made);
  answer("divergence", "dist-graph-create-copies-attributes", copied(made, key, before));
  release(&made);

  /* An intercommunicator between the two halves, from halves carrying the attribute. */
  if (size >= 2) {
    MPI_Comm half;
    MPI_Comm_split(base, rank % 2, rank, &half);
    MPI_Comm_set_attr(half, key, (void*)&key);
    before = copies;
    MPI_Comm inter;
    MPI_Intercomm_create(half, 0, base, rank % 2 ? 0 : 1, 11, &inter);
    answer("divergence", "intercomm-create-runs-copy-callbacks", copied(inter, key, before));
    MPI_Comm_delete_attr(inter, key); /* (whether or not it was copied: a clean merge question) */
    MPI_Comm_set_attr(inter, key, (void*)&key);
    before = copies;
    MPI_Intercomm_merge(inter, rank % 2, &made);
    answer("divergence", "intercomm-merge-copies-attributes", copied(made, key, before));
    release(&made);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
  }
  MPI_Group_free(&group);
  MPI_Comm_free(&base);
  MPI_Comm_free_keyval(&key);
}

/* ---- MPI_Type_free of a datatype another one was built from ----------------------------------- */

static int type_deletes;

static int counting_type_delete(MPI_Datatype t, int key, void* v, void* extra) {
  (void)t; (void)key; (void)v; (void)extra;
  ++type_deletes;
  return MPI_SUCCESS;
}

static void probe_type_free(void) {
  int key;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, counting_type_delete, &key, NULL);
  MPI_Datatype base, built;
  MPI_Type_contiguous(2, MPI_INT, &base);
  MPI_Type_set_attr(base, key, (void*)&key);
  MPI_Type_contiguous(3, base, &built);
  MPI_Type_commit(&built);
  type_deletes = 0;
  MPI_Type_free(&base);
  answer("divergence", "type-free-defers-delete-callbacks", type_deletes == 0);
  MPI_Type_free(&built);
  MPI_Type_free_keyval(&key);
}

/* ---- window constructors: an internal duplicate of the communicator, with its attributes --------- */

static int win_copies, win_deletes;

static int win_comm_copy(MPI_Comm old, int key, void* extra, void* in, void* out, int* flag) {
  (void)old; (void)key;
  ++win_copies;
  *(void**)out = in;
  *flag = *(int*)extra; /* 0: declines, so nothing is left to delete */
  return MPI_SUCCESS;
}

static int win_comm_delete(MPI_Comm c, int key, void* v, void* extra) {
  (void)c; (void)key; (void)v; (void)extra;
  ++win_deletes;
  return MPI_SUCCESS;
}

/* The standard: a window constructor copies no communicator attributes (only the dup family
 * does), so the program's copy callbacks never run inside one. Asked of each constructor on
 * MPI_COMM_SELF carrying an attribute whose copy callback declines, then accepts (whose copy, on
 * a communicator the program never sees, is deleted at MPI_Win_free). */
static void probe_window_constructors(void) {
  static int decline = 0, accept = 1;
  static const char* const names[4] = {"MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared",
                                       "MPI_Win_create_dynamic"};
  int ran[4] = {0, 0, 0, 0}, deleted[4] = {0, 0, 0, 0}, any = 0, all = 1;
  for (int which = 0; which < 4; ++which) {
    for (int accepting = 0; accepting < 2; ++accepting) {
      int key;
      MPI_Comm_create_keyval(win_comm_copy, win_comm_delete, &key, accepting ? &accept : &decline);
      MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)&key);
      win_copies = win_deletes = 0;
      char memory[64];
      void* base = NULL;
      MPI_Win win = MPI_WIN_NULL;
      int rc = MPI_ERR_OTHER;
      if (which == 0) rc = MPI_Win_create(memory, sizeof memory, 1, MPI_INFO_NULL, MPI_COMM_SELF, &win);
      if (which == 1) rc = MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_SELF, &base, &win);
      if (which == 2) rc = MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_SELF, &base, &win);
      if (which == 3) rc = MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_SELF, &win);
      if (rc == MPI_SUCCESS && win_copies) ++ran[which];
      if (rc == MPI_SUCCESS) MPI_Win_free(&win);
      if (accepting) deleted[which] = win_deletes;
      MPI_Comm_delete_attr(MPI_COMM_SELF, key);
      MPI_Comm_free_keyval(&key);
    }
    any |= ran[which] != 0;
    all &= ran[which] == 2;
  }
  if (rank == 0 && any && !all) {
    printf("note window constructors that ran copy callbacks (declining, accepting):");
    for (int i = 0; i < 4; ++i) printf(" %s %d", names[i], ran[i]);
    printf("\n");
  }
  if (rank == 0 && any)
    printf("note deletes at MPI_Win_free of an accepted copy: %d %d %d %d\n", deleted[0], deleted[1], deleted[2],
           deleted[3]);
  answer("divergence", "win-constructors-dup-communicator", any);
}

/* ---- a replacing MPI_Type_set_attr / MPI_Win_set_attr ---------------------------------------- */

static int kept_deletes;

static int counting_type_delete_kept(MPI_Datatype t, int key, void* v, void* extra) {
  (void)t; (void)key; (void)v; (void)extra;
  ++kept_deletes;
  return MPI_SUCCESS;
}

static int counting_win_delete_kept(MPI_Win w, int key, void* v, void* extra) {
  (void)w; (void)key; (void)v; (void)extra;
  ++kept_deletes;
  return MPI_SUCCESS;
}

/* The standard: setting an attribute that is already set runs its delete callback on the old
 * value first. MPICH keeps a datatype's or window's attributes in a list meant to be sorted by
 * keyval handle, but inserts a new one *after* the first entry whose handle is greater: a later
 * set of that key finds the greater one first and inserts again, with no delete callback, and
 * the object then holds both values. The order that triggers it, made here: the attribute of the
 * greater handle set first, then the smaller one set twice (handles compared as the library
 * compares them, as ints). */
static void probe_replacing_set(void) {
  int a, b, missed = 0;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, counting_type_delete_kept, &a, NULL);
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, counting_type_delete_kept, &b, NULL);
  int lo = a < b ? a : b, hi = a < b ? b : a;
  MPI_Datatype t;
  MPI_Type_contiguous(2, MPI_INT, &t);
  MPI_Type_set_attr(t, hi, (void*)&hi);
  MPI_Type_set_attr(t, lo, (void*)&lo);
  kept_deletes = 0;
  MPI_Type_set_attr(t, lo, (void*)&hi);
  if (kept_deletes == 0) ++missed;
  MPI_Type_free(&t);
  MPI_Type_free_keyval(&a);
  MPI_Type_free_keyval(&b);

  MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, counting_win_delete_kept, &a, NULL);
  MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, counting_win_delete_kept, &b, NULL);
  lo = a < b ? a : b;
  hi = a < b ? b : a;
  MPI_Win win;
  if (MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_SELF, &win) == MPI_SUCCESS) {
    MPI_Win_set_attr(win, hi, (void*)&hi);
    MPI_Win_set_attr(win, lo, (void*)&lo);
    kept_deletes = 0;
    MPI_Win_set_attr(win, lo, (void*)&hi);
    if (kept_deletes == 0) missed += 2;
    MPI_Win_free(&win);
  }
  MPI_Win_free_keyval(&a);
  MPI_Win_free_keyval(&b);
  if (rank == 0 && (missed == 1 || missed == 2))
    printf("note a replacing set ran no delete callback only on %s\n", missed == 1 ? "a datatype" : "a window");
  answer("divergence", "replacing-set-attr-keeps-old-value", missed != 0);
}

/* ---- MPI_WIN_BASE of an allocated window --------------------------------------------------------- */

/* The standard: MPI_WIN_BASE is the window's base address, the one MPI_Win_allocate returned.
 * Asked on every rank of MPI_COMM_WORLD (MPICH 4.0.2's ch4:ucx hands rank 1 of 2 an 8-byte window
 * base 8 bytes below it), for a few sizes. */
static void probe_window_base(void) {
  static const MPI_Aint sizes[] = {8, 16, 64, 256};
  int differs = 0, any = 0;
  char which[64] = "";
  for (int i = 0; i < 4; ++i) {
    void* base = NULL;
    MPI_Win win;
    if (MPI_Win_allocate(sizes[i], 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win) != MPI_SUCCESS) continue;
    void* attr = NULL;
    int flag = 0;
    MPI_Win_get_attr(win, MPI_WIN_BASE, &attr, &flag);
    int mine = !flag || attr != base, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (all) {
      any = 1;
      size_t n = strlen(which);
      snprintf(which + n, sizeof which - n, " %ld", (long)sizes[i]);
    }
    differs |= mine;
    MPI_Win_free(&win);
  }
  if (rank == 0 && any) printf("note MPI_WIN_BASE differs from the allocated base at %d ranks, sizes:%s\n", size, which);
  answer("divergence", "win-allocate-base-attribute-differs", any);
  (void)differs;
}

/* ---- MPI_Comm_free when a delete callback fails ------------------------------------------------ */

static int failing = 1;

static int failing_delete(MPI_Comm c, int key, void* v, void* extra) {
  (void)c; (void)key; (void)v; (void)extra;
  return failing ? MPI_ERR_OTHER : MPI_SUCCESS;
}

/* The standard: the free fails, and the attribute whose delete callback failed stays (an attribute
 * whose callback ran and succeeded before it may be gone). Asked with the failing attribute set
 * first and set last (libraries run the callbacks in an order of their own). */
static void probe_failed_delete(void) {
  int fail_key, ok_key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_delete, &fail_key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ok_key, NULL);
  int succeeded = 0, dropped = 0;
  for (int order = 0; order < 2; ++order) {
    MPI_Comm c, kept;
    MPI_Comm_dup(MPI_COMM_SELF, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Comm_set_attr(c, order ? ok_key : fail_key, (void*)&order);
    MPI_Comm_set_attr(c, order ? fail_key : ok_key, (void*)&order);
    failing = 1;
    kept = c;
    if (MPI_Comm_free(&c) == MPI_SUCCESS) {
      ++succeeded;
      continue;
    }
    c = kept;
    int flag = 0;
    void* v;
    MPI_Comm_get_attr(c, fail_key, &v, &flag);
    if (!flag) ++dropped;
    failing = 0;
    MPI_Comm_free(&c);
  }
  answer("divergence", "comm-free-drops-attributes-on-failed-delete", succeeded || dropped);
  MPI_Comm_free_keyval(&fail_key);
  MPI_Comm_free_keyval(&ok_key);
}

/* ---- MPI_Finalize: MPI_COMM_SELF's delete order, MPI_COMM_WORLD's attributes ------------------ */

static int self_order[8], self_deleted, finalizing;
static int world_deleted;

/* (Setting an attribute again runs its delete callback on the old value: not counted.) */
static int recording_delete(MPI_Comm c, int key, void* v, void* extra) {
  (void)c; (void)key; (void)extra;
  if (finalizing && self_deleted < 8) self_order[self_deleted++] = *(int*)v;
  return MPI_SUCCESS;
}

static int world_delete(MPI_Comm c, int key, void* v, void* extra) {
  (void)c; (void)key; (void)v; (void)extra;
  ++world_deleted;
  return MPI_SUCCESS;
}

static int tags[3] = {1, 2, 3};

static void prepare_finalize(void) {
  int keys[3], world_key;
  for (int i = 0; i < 3; ++i) {
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, recording_delete, &keys[i], NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, keys[i], &tags[i]);
  }
  MPI_Comm_set_attr(MPI_COMM_SELF, keys[0], &tags[0]); /* set again: the newest now */
  for (int i = 0; i < 3; ++i) MPI_Comm_free_keyval(&keys[i]);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, world_delete, &world_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, world_key, NULL);
  MPI_Comm_free_keyval(&world_key);
}

static void answer_finalize(void) {
  /* The standard's order (reverse order of setting): 1 (set last), 3, 2. */
  const int standard = self_deleted == 3 && self_order[0] == 1 && self_order[1] == 3 && self_order[2] == 2;
  const int first_set = self_deleted == 3 && self_order[0] == 3 && self_order[1] == 2 && self_order[2] == 1;
  if (rank == 0 && !standard && !first_set) {
    printf("note MPI_COMM_SELF's delete callbacks ran %d times, in the order", self_deleted);
    for (int i = 0; i < self_deleted; ++i) printf(" %d", self_order[i]);
    printf(" (set 1 2 3, then 1 again)\n");
  }
  answer("divergence", "self-delete-order-ignores-reset", !standard);
  answer("behaviour", "world-attributes-deleted-at-finalize", world_deleted > 0);
}

/* ---- questions whose answer may be an abort ---------------------------------------------------- */

static int key_deleted_in_free;

static int delete_another(MPI_Comm c, int key, void* v, void* extra) {
  (void)key; (void)v; (void)extra;
  MPI_Comm_delete_attr(c, key_deleted_in_free);
  return MPI_SUCCESS;
}

/* What MPI_Comm_free returns when a delete callback it runs deletes another attribute of the
 * communicator (MPICH 4.0 aborts). */
static void probe_delete_in_free(void) {
  MPI_Comm c;
  int key;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_another, &key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key_deleted_in_free, NULL);
  MPI_Comm_set_attr(c, key_deleted_in_free, NULL);
  MPI_Comm_set_attr(c, key, NULL);
  if (rank == 0) printf("asking error-class delete-attribute-in-free-callback\n");
  fflush(stdout);
  const int rc = MPI_Comm_free(&c);
  error_class("delete-attribute-in-free-callback", rc);
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&key_deleted_in_free);
}

int main(int argc, char** argv) {
  /* (Read before MPI_Init, which may rewrite the arguments: Open MPI 6.0 drops them.) */
  const int abort_questions = argc > 1 && !strcmp(argv[1], "--abort-questions");
  MPI_Init(&argc, &argv);
  if (abort_questions) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    probe_delete_in_free();
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  version[strcspn(version, "\n")] = '\0';
  if (rank == 0) printf("library-version %s\n", version);

  probe_error_classes();
  probe_constructors();
  probe_type_free();
  probe_failed_delete();
  probe_window_constructors();
  probe_replacing_set();
  probe_window_base();
  prepare_finalize();
  fflush(stdout);
  finalizing = 1;
  MPI_Finalize();
  answer_finalize();
  return 0;
}
