// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Callbacks that act in the middle of the call that runs them, as real libraries' cleanup hooks
 * do; every call is legal and each mode must follow it step by step, as the library does:
 * - a replacing set on a communicator, a datatype and a window whose delete callback frees its
 *   own keyval (the key is in use: it stays valid for the attribute, which the set then holds);
 *   later a dup copies the new value, and a delete through the freed key ends it;
 * - a delete whose callback frees its own keyval;
 * - a dup whose copy callback frees its own keyval, and one that frees another keyval whose
 *   attribute is still to be copied;
 * - a free whose delete callback frees another keyval still used on the object being freed;
 * - a replacing set whose delete callback sets an attribute on another communicator, and one
 *   whose callback frees another communicator that carries attributes;
 * - a dup whose copy callback creates a keyval and sets it on another communicator, and one
 *   whose copy callback duplicates and frees another communicator.
 * What the callbacks saw is printed by rank 0 in an order the standard fixes (sums, not copy
 * order); a failing call is printed by any rank. */
#include <mpi.h>
#include <stdio.h>

static int rank;
static long seen;  // sum of the values every callback was given, weighted per step

#define CHECK(call)                                                   \
  do {                                                                \
    int rc_ = (call);                                                 \
    if (rc_ != MPI_SUCCESS) {                                         \
      printf("%d: %s failed (%d) at line %d\n", rank, #call, rc_, __LINE__); \
    }                                                                 \
  } while (0)

static int free_own_once;
static int comm_free_own(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)e;
  seen += (long)(size_t)v;
  if (free_own_once) { free_own_once = 0; CHECK(MPI_Comm_free_keyval(&k)); }
  return MPI_SUCCESS;
}
static int type_free_own(MPI_Datatype t, int k, void* v, void* e) {
  (void)t; (void)e;
  seen += 10 * (long)(size_t)v;
  if (free_own_once) { free_own_once = 0; CHECK(MPI_Type_free_keyval(&k)); }
  return MPI_SUCCESS;
}
static int win_free_own(MPI_Win w, int k, void* v, void* e) {
  (void)w; (void)e;
  seen += 100 * (long)(size_t)v;
  if (free_own_once) { free_own_once = 0; CHECK(MPI_Win_free_keyval(&k)); }
  return MPI_SUCCESS;
}
static int copy_plus_one(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)e;
  seen += 1000 * (long)(size_t)in;
  *(void**)out = (void*)((size_t)in + 1);
  *flag = 1;
  return MPI_SUCCESS;
}
static int count_delete(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)e;
  seen += (long)(size_t)v;
  return MPI_SUCCESS;
}

/* Step 1: replacing sets whose delete callback frees its own keyval. */
static void replace_frees_own_keyval(void) {
  int k;
  CHECK(MPI_Comm_create_keyval(copy_plus_one, comm_free_own, &k, NULL));
  const int saved = k;
  CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, k, (void*)1));
  free_own_once = 1;
  CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, k, (void*)6));  // deletes 1, frees k, holds 6
  MPI_Comm d;
  CHECK(MPI_Comm_dup(MPI_COMM_SELF, &d));  // copies 6 -> 7
  CHECK(MPI_Comm_free(&d));                // deletes 7
  CHECK(MPI_Comm_delete_attr(MPI_COMM_SELF, saved));  // deletes 6; the key goes
  if (rank == 0) printf("comm replace %ld\n", seen);

  MPI_Datatype t, t2;
  CHECK(MPI_Type_contiguous(2, MPI_INT, &t));
  CHECK(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, type_free_own, &k, NULL));
  CHECK(MPI_Type_set_attr(t, k, (void*)2));
  free_own_once = 1;
  CHECK(MPI_Type_set_attr(t, k, (void*)5));
  CHECK(MPI_Type_dup(t, &t2));  // copies 5
  CHECK(MPI_Type_free(&t2));
  CHECK(MPI_Type_free(&t));
  if (rank == 0) printf("type replace %ld\n", seen);

  MPI_Win w;
  void* base;
  CHECK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w));
  CHECK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, win_free_own, &k, NULL));
  CHECK(MPI_Win_set_attr(w, k, (void*)3));
  free_own_once = 1;
  CHECK(MPI_Win_set_attr(w, k, (void*)4));
  CHECK(MPI_Win_free(&w));
  if (rank == 0) printf("win replace %ld\n", seen);
}

/* Step 2: a delete whose callback frees its own keyval; dups whose copy callback frees keyvals. */
static int copy_frees_own(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)c; (void)e;
  seen += 1000 * (long)(size_t)in;
  if (free_own_once) { free_own_once = 0; CHECK(MPI_Comm_free_keyval(&k)); }
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int other_key = MPI_KEYVAL_INVALID;
static int copy_frees_other(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)e;
  seen += 1000 * (long)(size_t)in;
  if (other_key != MPI_KEYVAL_INVALID) CHECK(MPI_Comm_free_keyval(&other_key));
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_frees_other(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)e;
  seen += (long)(size_t)v;
  if (other_key != MPI_KEYVAL_INVALID) CHECK(MPI_Comm_free_keyval(&other_key));
  return MPI_SUCCESS;
}
static void callbacks_free_keyvals(void) {
  MPI_Comm a, d;
  int k;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_free_own, &k, NULL));
  CHECK(MPI_Comm_set_attr(a, k, (void*)7));
  free_own_once = 1;
  CHECK(MPI_Comm_delete_attr(a, k));  // deletes 7, frees k, which goes with it
  CHECK(MPI_Comm_create_keyval(copy_frees_own, count_delete, &k, NULL));
  CHECK(MPI_Comm_set_attr(a, k, (void*)8));
  free_own_once = 1;
  CHECK(MPI_Comm_dup(a, &d));  // copies 8, frees k
  CHECK(MPI_Comm_free(&d));    // deletes the copy
  int k2;
  CHECK(MPI_Comm_create_keyval(copy_frees_other, count_delete, &k2, NULL));
  CHECK(MPI_Comm_create_keyval(copy_plus_one, count_delete, &other_key, NULL));
  CHECK(MPI_Comm_set_attr(a, other_key, (void*)9));
  CHECK(MPI_Comm_set_attr(a, k2, (void*)11));
  CHECK(MPI_Comm_dup(a, &d));  // copies both, in the library's order; one frees other_key
  CHECK(MPI_Comm_free(&d));
  CHECK(MPI_Comm_free_keyval(&k2));
  CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_frees_other, &k2, NULL));
  CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &other_key, NULL));
  CHECK(MPI_Comm_set_attr(a, other_key, (void*)12));
  CHECK(MPI_Comm_set_attr(a, k2, (void*)13));
  CHECK(MPI_Comm_free(&a));  // deletes all (k's 8 too), one callback frees other_key
  CHECK(MPI_Comm_free_keyval(&k2));
  if (rank == 0) printf("keyvals freed %ld\n", seen);
}

/* Step 3: callbacks that act on other objects. */
static MPI_Comm other = MPI_COMM_NULL;
static int set_on_other(MPI_Comm c, int k, void* v, void* e) {
  (void)e;
  seen += (long)(size_t)v;
  if (other != MPI_COMM_NULL && c != other) CHECK(MPI_Comm_set_attr(other, k, (void*)((size_t)v + 100)));
  return MPI_SUCCESS;
}
static int free_other(MPI_Comm c, int k, void* v, void* e) {
  (void)k; (void)e;
  seen += (long)(size_t)v;
  if (other != MPI_COMM_NULL && c != other) {
    MPI_Comm o = other;
    other = MPI_COMM_NULL;
    CHECK(MPI_Comm_free(&o));
  }
  return MPI_SUCCESS;
}
static int made_key = MPI_KEYVAL_INVALID;
static int copy_makes_keyval(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)k; (void)e;
  seen += 1000 * (long)(size_t)in;
  if (made_key == MPI_KEYVAL_INVALID && c != other) {
    CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &made_key, NULL));
    CHECK(MPI_Comm_set_attr(other, made_key, (void*)21));
  }
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int copy_dups_other(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)k; (void)e;
  seen += 1000 * (long)(size_t)in;
  if (other != MPI_COMM_NULL && c != other) {
    MPI_Comm x;
    CHECK(MPI_Comm_dup(other, &x));
    CHECK(MPI_Comm_free(&x));
  }
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static void callbacks_act_on_other_objects(void) {
  MPI_Comm a, d;
  int k, k2;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &other));
  CHECK(MPI_Comm_create_keyval(copy_plus_one, set_on_other, &k, NULL));
  CHECK(MPI_Comm_set_attr(a, k, (void*)1));
  CHECK(MPI_Comm_set_attr(a, k, (void*)2));  // sets 101 on other
  CHECK(MPI_Comm_set_attr(a, k, (void*)3));  // replaces it with 102 (whose delete sets nothing)
  void* v = NULL;
  int flag = 0;
  CHECK(MPI_Comm_get_attr(other, k, &v, &flag));
  if (rank == 0) printf("set on other %d %ld\n", flag, (long)(size_t)v);
  CHECK(MPI_Comm_free(&a));

  CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_other, &k2, NULL));
  CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &made_key, NULL));
  CHECK(MPI_Comm_set_attr(other, made_key, (void*)30));
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK(MPI_Comm_set_attr(a, k2, (void*)4));
  CHECK(MPI_Comm_set_attr(a, k2, (void*)5));  // frees other, running its deletes
  CHECK(MPI_Comm_free(&a));
  CHECK(MPI_Comm_free_keyval(&made_key));
  if (rank == 0) printf("free other %ld\n", seen);

  int k3, k4;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &other));
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK(MPI_Comm_create_keyval(copy_makes_keyval, count_delete, &k3, NULL));
  CHECK(MPI_Comm_create_keyval(copy_dups_other, count_delete, &k4, NULL));
  CHECK(MPI_Comm_set_attr(other, k, (void*)40));
  CHECK(MPI_Comm_set_attr(a, k3, (void*)41));
  CHECK(MPI_Comm_set_attr(a, k4, (void*)42));
  CHECK(MPI_Comm_dup(a, &d));
  CHECK(MPI_Comm_get_attr(other, made_key, &v, &flag));
  if (rank == 0) printf("made on other %d %ld\n", flag, (long)(size_t)v);
  CHECK(MPI_Comm_free(&d));
  CHECK(MPI_Comm_free(&a));
  MPI_Comm o = other;
  other = MPI_COMM_NULL;
  CHECK(MPI_Comm_free(&o));
  CHECK(MPI_Comm_free_keyval(&k));
  CHECK(MPI_Comm_free_keyval(&k2));
  CHECK(MPI_Comm_free_keyval(&k3));
  CHECK(MPI_Comm_free_keyval(&k4));
  CHECK(MPI_Comm_free_keyval(&made_key));
  if (rank == 0) printf("dups acting %ld\n", seen);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  replace_frees_own_keyval();
  callbacks_free_keyvals();
  callbacks_act_on_other_objects();
  MPI_Finalize();
  return 0;
}
