// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_SERIALIZED, sets one thread makes and another thread reads next. In shadow mode a
 * run of sets is checked at once and applied to attrcheck's engine later (deferred sets); at
 * SERIALIZED whichever thread calls MPI next must see them: its gets, a delete (its delete
 * callback gets the value the other thread set), a dup (copy callbacks), a set replacing one,
 * sets left pending by a thread that has exited since, and a get of a query whose cached answer
 * another thread's pending set made stale. Every answer is printed and must be the
 * native run's; a model that missed a set would also report impl.divergence (the case is clean).
 * The threads take turns strictly (each phase is joined before the next starts, or handed over
 * with a mutex and condition variable). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { KEYS = 6 };

static MPI_Comm comm;
static int keys[KEYS];

static void say(const char* who, const char* what, long value) {
  printf("%s: %s %ld\n", who, what, value);
  fflush(stdout);
}

/* What the callbacks saw, per key, printed in key order (the order callbacks run in is the
   library's business). */
static long copy_saw[KEYS], delete_saw[KEYS];
static int copies[KEYS], deletes[KEYS];

static int copy_seen(MPI_Comm c, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)c; (void)extra;
  for (int i = 0; i < KEYS; ++i)
    if (keyval == keys[i]) copy_saw[i] = (long)in, ++copies[i];
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_seen(MPI_Comm c, int keyval, void* value, void* extra) {
  (void)c; (void)extra;
  for (int i = 0; i < KEYS; ++i)
    if (keyval == keys[i]) delete_saw[i] = (long)value, ++deletes[i];
  return MPI_SUCCESS;
}
static void say_callbacks(const char* who) {
  for (int i = 0; i < KEYS; ++i) {
    if (copies[i]) printf("%s: key %d: %d copy callback(s), the last saw %ld\n", who, i, copies[i], copy_saw[i]);
    if (deletes[i]) printf("%s: key %d: %d delete callback(s), the last saw %ld\n", who, i, deletes[i], delete_saw[i]);
    copies[i] = deletes[i] = 0;
  }
  fflush(stdout);
}

static long get(MPI_Comm c, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(c, key, &v, &flag);
  return flag ? (long)v : -1;
}

/* Phase 1 (thread A): sets every key twice, in a run. */
static void* set_all(void* arg) {
  const long base = (long)arg;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < KEYS; ++i) MPI_Comm_set_attr(comm, keys[i], (void*)(base + round * 10 + i));
  return NULL;
}

/* Phase 2 (thread B): reads, deletes, replaces and dups what A left. */
static void* use_all(void* arg) {
  (void)arg;
  for (int i = 0; i < KEYS; ++i) say("B", "get", get(comm, keys[i]));
  MPI_Comm_delete_attr(comm, keys[0]);
  say("B", "after delete, get", get(comm, keys[0]));
  MPI_Comm_set_attr(comm, keys[1], (void*)77);
  say("B", "after set, get", get(comm, keys[1]));
  say_callbacks("B, delete and set");
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  say_callbacks("B, dup");
  for (int i = 0; i < KEYS; ++i) say("B", "dup's get", get(dup, keys[i]));
  MPI_Comm_free(&dup);
  say_callbacks("B, free");
  return NULL;
}

/* Phase 3: two threads alternate, each setting one key and reading the other's right after. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;
enum { ROUNDS = 50 };
static long wrong;

static void wait_turn(int me) {
  pthread_mutex_lock(&mu);
  while (turn != me) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
}
static void give_turn(int other) {
  pthread_mutex_lock(&mu);
  turn = other;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
}

/* Reads key 0 twice, the main thread's set in between (turns: this thread is 1). */
static void* get_twice(void* arg) {
  (void)arg;
  wait_turn(1);
  say("B", "get", get(comm, keys[0]));
  give_turn(0);
  wait_turn(1);
  say("B", "get after main's set", get(comm, keys[0]));
  return NULL;
}

static void* alternate(void* arg) {
  const int me = (int)(long)arg;
  for (int r = 0; r < ROUNDS; ++r) {
    pthread_mutex_lock(&mu);
    while (turn != me) pthread_cond_wait(&cv, &mu);
    /* The other thread's set of the round before (or phase 2's state in the first round). */
    const long theirs = get(comm, keys[2 + !me]);
    if (r > 0 || me == 1) wrong += theirs != 1000 * !me + r - (me == 0);
    MPI_Comm_set_attr(comm, keys[2 + me], (void*)(long)(1000 * me + r));
    MPI_Comm_set_attr(comm, keys[4 + me], (void*)(long)(1000 * me + r));
    if (r % 7 == 3) MPI_Comm_delete_attr(comm, keys[4 + me]);
    wrong += get(comm, keys[2 + me]) != 1000 * me + r;
    turn = !me;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED) {
    printf("MPI_THREAD_SERIALIZED not provided\n");
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_dup(MPI_COMM_SELF, &comm);
  for (int i = 0; i < KEYS; ++i) {
    if (i % 2) MPI_Comm_create_keyval(copy_seen, delete_seen, &keys[i], NULL);
    else MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &keys[i], NULL);
  }
  pthread_t a, b;
  pthread_create(&a, NULL, set_all, (void*)100);
  pthread_join(a, NULL);  /* A has exited: its pending sets must have been handed over */
  say_callbacks("A, sets");
  pthread_create(&b, NULL, use_all, NULL);
  pthread_join(b, NULL);
  for (int i = 0; i < KEYS; ++i) say("main", "get", get(comm, keys[i]));

  /* A thread that sets and exits, then the main thread deletes and frees. */
  pthread_create(&a, NULL, set_all, (void*)200);
  pthread_join(a, NULL);
  say_callbacks("A, sets");
  MPI_Comm_delete_attr(comm, keys[3]);
  say("main", "after delete, get", get(comm, keys[3]));
  say_callbacks("main, delete");

  pthread_t t0, t1;
  pthread_create(&t0, NULL, alternate, (void*)0);
  pthread_create(&t1, NULL, alternate, (void*)1);
  pthread_join(t0, NULL);
  pthread_join(t1, NULL);
  say("main", "wrong answers while alternating", wrong);
  say_callbacks("alternating");
  for (int i = 2; i < KEYS; ++i) say("main", "get", get(comm, keys[i]));

  /* Sets left pending by the main thread, then a thread that reads them and exits. */
  set_all((void*)300);
  say_callbacks("main, sets");
  pthread_create(&b, NULL, use_all, NULL);
  pthread_join(b, NULL);

  /* A get of a query whose cached answer is current for the engine while another thread's set
     of it is pending: B reads key 0 (its first call applies the main thread's sets), then the
     main thread replaces it, deferred, and B reads it again. B's answer must not be
     cross-checked from its cache (the get wrappers' quick version source is a never-current
     word while any thread's sets are pending). */
  MPI_Comm_set_attr(comm, keys[0], (void*)401);
  MPI_Comm_set_attr(comm, keys[0], (void*)402);
  turn = 1;
  pthread_create(&b, NULL, get_twice, NULL);
  wait_turn(0);
  MPI_Comm_set_attr(comm, keys[0], (void*)555);
  give_turn(1);
  pthread_join(b, NULL);
  say("main", "get after B's gets", get(comm, keys[0]));

  MPI_Comm_free(&comm);
  say_callbacks("main, free");
  for (int i = 0; i < KEYS; ++i) MPI_Comm_free_keyval(&keys[i]);
  MPI_Finalize();
  return 0;
}
