// attrcheck-test: np=2 modes=shadow,emulate
// divergence: type-free-defers-delete-callbacks
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE churn: every thread creates and frees keyvals and objects of all three
 * caching kinds' worth of calls at once, all of them legal. Per round a thread
 *   - duplicates MPI_COMM_SELF twice (MPI_COMM_SELF carries one attribute per thread, each with a
 *     copy callback, so every dup runs every thread's copy callback), sets, gets, replaces and
 *     deletes an attribute on the first duplicate, and frees both;
 *   - sets (replacing) and gets its own attribute on a communicator all threads share;
 *   - creates a datatype keyval, makes a contiguous datatype with an attribute, duplicates it,
 *     reads the duplicate's copy, frees the original first (while the duplicate lives), then the
 *     duplicate and the keyval;
 *   - every 10th round, creates a communicator keyval, sets it on the second duplicate, and frees
 *     the keyval while that attribute still uses it (legal: the delete callback runs at the free).
 * Every attribute the program holds is counted up when set or copied and down when a delete
 * callback runs for it; at the end every count must balance. The number of threads and rounds
 * come from CHURN_THREADS and CHURN_ROUNDS (scripts/soak-threads.sh runs 8 x 200); the suite's
 * run is short. Meant for MPICH above all, which hands a freed handle or keyval number out again
 * at once, so that one thread's new object or keyval often takes the number another thread has
 * just freed. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { MAX_THREADS = 64 };

static int threads = 4, rounds = 40;
static MPI_Comm shared;
static long live;      /* attributes the program holds that a delete callback has not ended */
static long failures;  /* calls that failed or answered wrongly */
static int self_key[MAX_THREADS];

static void add(long* counter, long n) { __atomic_add_fetch(counter, n, __ATOMIC_RELAXED); }

static void check(int rc, const char* what, int round) {
  if (rc == MPI_SUCCESS) return;
  add(&failures, 1);
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fprintf(stderr, "%s failed in round %d: %s\n", what, round, msg);
}

static int comm_copy(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)extra;
  add(&live, 1);
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int comm_delete(MPI_Comm c, int k, void* value, void* extra) {
  (void)c; (void)k; (void)value; (void)extra;
  add(&live, -1);
  return MPI_SUCCESS;
}
static int type_copy(MPI_Datatype t, int k, void* extra, void* in, void* out, int* flag) {
  (void)t; (void)k; (void)extra;
  add(&live, 1);
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int type_delete(MPI_Datatype t, int k, void* value, void* extra) {
  (void)t; (void)k; (void)value; (void)extra;
  add(&live, -1);
  return MPI_SUCCESS;
}

static void* churn(void* arg) {
  const long me = (long)arg;
  int own_key, type_key, shared_key;
  check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &own_key, NULL), "create own key", -1);
  check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &shared_key, NULL), "create shared key", -1);
  for (int round = 0; round < rounds; ++round) {
    void* got = NULL;
    int flag = 0;
    MPI_Comm a, b;
    check(MPI_Comm_dup(MPI_COMM_SELF, &a), "MPI_Comm_dup", round);
    check(MPI_Comm_dup(MPI_COMM_SELF, &b), "MPI_Comm_dup", round);
    check(MPI_Comm_get_attr(a, self_key[me], &got, &flag), "get copied", round);
    if (!flag || got != (void*)(me + 1)) add(&failures, 1);

    check(MPI_Comm_set_attr(a, own_key, (void*)1), "set", round);
    add(&live, 1);
    check(MPI_Comm_get_attr(a, own_key, &got, &flag), "get", round);
    if (!flag || got != (void*)1) add(&failures, 1);
    check(MPI_Comm_set_attr(a, own_key, (void*)2), "replace", round);
    add(&live, 1);
    check(MPI_Comm_delete_attr(a, own_key), "delete", round);

    check(MPI_Comm_set_attr(shared, shared_key, (void*)(long)(round + 1)), "set shared", round);
    add(&live, 1);
    check(MPI_Comm_get_attr(shared, shared_key, &got, &flag), "get shared", round);
    if (!flag || got != (void*)(long)(round + 1)) add(&failures, 1);

    if (round % 10 == 0) {
      int short_key;
      check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &short_key, NULL), "create short key", round);
      check(MPI_Comm_set_attr(b, short_key, (void*)3), "set short", round);
      add(&live, 1);
      check(MPI_Comm_free_keyval(&short_key), "free short key", round);
      if (short_key != MPI_KEYVAL_INVALID) add(&failures, 1);
    }
    check(MPI_Comm_free(&a), "MPI_Comm_free", round);
    check(MPI_Comm_free(&b), "MPI_Comm_free", round);

    MPI_Datatype t, t2;
    check(MPI_Type_create_keyval(type_copy, type_delete, &type_key, NULL), "create type key", round);
    check(MPI_Type_contiguous(2, MPI_INT, &t), "MPI_Type_contiguous", round);
    check(MPI_Type_set_attr(t, type_key, (void*)(me + 7)), "set type", round);
    add(&live, 1);
    check(MPI_Type_dup(t, &t2), "MPI_Type_dup", round);
    check(MPI_Type_get_attr(t2, type_key, &got, &flag), "get type copy", round);
    if (!flag || got != (void*)(me + 7)) add(&failures, 1);
    check(MPI_Type_free(&t), "MPI_Type_free", round);
    check(MPI_Type_free(&t2), "MPI_Type_free dup", round);
    check(MPI_Type_free_keyval(&type_key), "free type key", round);
  }
  check(MPI_Comm_delete_attr(shared, shared_key), "delete shared", -1);
  check(MPI_Comm_free_keyval(&own_key), "free own key", -1);
  check(MPI_Comm_free_keyval(&shared_key), "free shared key", -1);
  return NULL;
}

static int env_int(const char* name, int fallback, int max) {
  const char* s = getenv(name);
  const int v = s ? atoi(s) : 0;
  return v > 0 && v <= max ? v : fallback;
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) printf("MPI_THREAD_MULTIPLE not provided\n");
    MPI_Finalize();
    return 0;
  }
  threads = env_int("CHURN_THREADS", threads, MAX_THREADS);
  rounds = env_int("CHURN_ROUNDS", rounds, 1000000);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &shared);
  for (long i = 0; i < threads; ++i) {
    check(MPI_Comm_create_keyval(comm_copy, comm_delete, &self_key[i], NULL), "create self key", -1);
    check(MPI_Comm_set_attr(MPI_COMM_SELF, self_key[i], (void*)(i + 1)), "set self", -1);
    add(&live, 1);
  }

  pthread_t tid[MAX_THREADS];
  for (long i = 0; i < threads; ++i) pthread_create(&tid[i], NULL, churn, (void*)i);
  for (int i = 0; i < threads; ++i) pthread_join(tid[i], NULL);

  for (int i = 0; i < threads; ++i) {
    check(MPI_Comm_delete_attr(MPI_COMM_SELF, self_key[i]), "delete self", -1);
    check(MPI_Comm_free_keyval(&self_key[i]), "free self key", -1);
  }
  MPI_Comm_free(&shared);
  long all[2] = {live, failures}, sum[2];
  MPI_Allreduce(all, sum, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("churn: %s (attributes left %ld, failures %ld)\n", sum[0] == 0 && sum[1] == 0 ? "ok" : "WRONG",
                        sum[0], sum[1]);
  MPI_Finalize();
  return 0;
}
