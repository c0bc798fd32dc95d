// attrcheck-test: np=3 modes=emulate
// expect: callback.error
// clean
// exit: 0
/* Emulate mode at MPI_THREAD_MULTIPLE while one thread calls MPI: the cache defers the sets and
 * runs a delete callback itself (the delete of a deferred first set, a set replacing a value).
 * Here a second thread makes its first MPI calls while such a callback runs: that ends deferral
 * and makes attrcheck's engine current, the attribute whose callback runs included. What the
 * standard says must still hold: the two threads' calls behave as if made in some order.
 *  - The callback releases the second thread and waits until its calls on other objects
 *    (MPI_COMM_SELF, a dup of it) have returned: none of them may wait for this callback (it
 *    would hang).
 *  - The second thread then changes the attribute the callback runs for; that call comes after the
 *    first thread's (the callback is already running), so it must not see the old value: on rank
 *    0 the first thread deletes the attribute and the second sets it again (its set replaces
 *    nothing), on rank 1 the first thread replaces the value and the second deletes it (its
 *    delete callback gets the new value). Each value's delete callback runs exactly once. On
 *    rank 2 the callback fails, so the first thread's delete fails and the attribute stays: the
 *    second thread's set replaces it, and its callback runs a second time (it succeeds then).
 * The program checks every count and answer itself (a wrong one exits 1). The second call is made
 * while the callback sleeps, so a checker that let it through would be caught nearly always; one
 * that holds it back passes whatever the timing. */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { kTrigger = 1, kSecond = 2, kReplacing = 5, kWarm = 9 };

static MPI_Comm comm;
static int key, other_key, rank;
static atomic_int stage;  // 1: callback running, 2: other-object call done, 3: same-object call made
static atomic_long runs[16];

static void check(int ok, const char* what) {
  if (ok) return;
  printf("thread_multiple_cache_callback rank %d: FAILED: %s\n", rank, what);
  fflush(stdout);
  exit(1);
}

static int delete_counted(MPI_Comm c, int keyval, void* value, void* extra) {
  (void)c; (void)keyval; (void)extra;
  const long v = (long)value;
  if (v < 0 || v >= 16) return MPI_ERR_OTHER;
  if (++runs[v] == 1 && v == kTrigger) {
    atomic_store(&stage, 1);
    while (atomic_load(&stage) < 2) sched_yield();  // its call on MPI_COMM_SELF returned
    while (atomic_load(&stage) < 3) sched_yield();
    usleep(200 * 1000);  // its call on `comm` is under way: it must wait for this delete
    if (rank == 2) return MPI_ERR_OTHER;
  }
  return MPI_SUCCESS;
}

static long get(MPI_Comm c, int k) {
  void* v = NULL;
  int flag = 0;
  check(MPI_Comm_get_attr(c, k, &v, &flag) == MPI_SUCCESS, "get");
  return flag ? (long)v : -1;
}

static void* second(void* arg) {
  (void)arg;
  while (atomic_load(&stage) < 1) sched_yield();
  // Its first MPI calls, on another object, while the first thread's callback runs.
  check(MPI_Comm_set_attr(MPI_COMM_SELF, other_key, (void*)7) == MPI_SUCCESS, "second: set on SELF");
  check(get(MPI_COMM_SELF, other_key) == 7, "second: get on SELF");
  check(MPI_Comm_delete_attr(MPI_COMM_SELF, other_key) == MPI_SUCCESS, "second: delete on SELF");
  MPI_Comm dup;  // (an object made and freed: the first thread's change is then made the general way)
  check(MPI_Comm_dup(MPI_COMM_SELF, &dup) == MPI_SUCCESS && MPI_Comm_free(&dup) == MPI_SUCCESS, "second: dup + free");
  atomic_store(&stage, 2);
  atomic_store(&stage, 3);
  if (rank != 1) {
    check(MPI_Comm_set_attr(comm, key, (void*)kSecond) == MPI_SUCCESS, "second: set after the delete");
    check(get(comm, key) == kSecond, "second: get after its set");
  } else {
    check(MPI_Comm_delete_attr(comm, key) == MPI_SUCCESS, "second: delete after the replace");
    check(get(comm, key) == -1, "second: get after its delete");
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("no MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_dup(MPI_COMM_SELF, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_counted, &key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &other_key, NULL);
  pthread_t t;
  check(pthread_create(&t, NULL, second, NULL) == 0, "pthread_create");
  // The query made familiar (the cache's quick ways serve a query it has seen).
  for (int i = 0; i < 3; ++i) {
    check(MPI_Comm_set_attr(comm, key, (void*)kWarm) == MPI_SUCCESS, "warm set");
    check(MPI_Comm_delete_attr(comm, key) == MPI_SUCCESS, "warm delete");
  }
  check(runs[kWarm] == 3, "each warm-up value deleted once");
  check(MPI_Comm_set_attr(comm, key, (void*)kTrigger) == MPI_SUCCESS, "set");
  if (rank != 1) {  // the callback releases `second`
    const int rc = MPI_Comm_delete_attr(comm, key);
    check(rank == 2 ? rc != MPI_SUCCESS : rc == MPI_SUCCESS, rank == 2 ? "the failed delete fails" : "delete");
  } else {
    check(MPI_Comm_set_attr(comm, key, (void*)kReplacing) == MPI_SUCCESS, "replacing set");
  }
  check(pthread_join(t, NULL) == 0, "pthread_join");
  check(runs[kTrigger] == (rank == 2 ? 2 : 1), "the first value's delete callback ran once (rank 2: twice)");
  if (rank != 1) {
    check(runs[kSecond] == 0 && get(comm, key) == kSecond, "the second thread's set stands");
    check(MPI_Comm_delete_attr(comm, key) == MPI_SUCCESS, "last delete");
    check(runs[kSecond] == 1, "the second thread's value deleted once");
  } else {
    check(runs[kReplacing] == 1 && get(comm, key) == -1, "the second thread deleted the replacing value");
  }
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&other_key);
  MPI_Finalize();
  printf("thread_multiple_cache_callback: ok\n");
  return 0;
}
