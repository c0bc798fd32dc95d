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
 * up after itself, so that the next one starts from a library in a known state. */
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
                   : cls == MPI_ERR_COMM ? "MPI_ERR_COMM" : "another";
  if (rank == 0) printf("error-class %s %s\n", situation, name);
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

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
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
  prepare_finalize();
  fflush(stdout);
  finalizing = 1;
  MPI_Finalize();
  answer_finalize();
  return 0;
}
