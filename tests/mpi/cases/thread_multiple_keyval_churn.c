// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE: 4 pthreads create and free keyvals concurrently, far past shadow mode's
 * quarantine (src/runtime/process/keyvals.cpp holds 4,096 freed keys back and then hands them out again to
 * later creates), so the quarantine's ring and ready set and the library-key map are updated by
 * several threads at once: they are locked at MPI_THREAD_MULTIPLE only (below it calls never
 * overlap). Each round a thread creates a keyval with its own extra_state, checks that no other
 * thread holds the same key at the moment, creates and frees CHURN more keyvals (which no thread may
 * hold at the moment either), sets an attribute on its own communicator, reads it back, deletes it (delete callback:
 * it must get this thread's extra_state) and frees the key.
 * A key handed to two threads at once, or a callback run with another thread's state, is counted
 * as an error; every count must be exact. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define NTHREADS 4
#define ROUNDS 3000
#define CHURN 3

struct thread_state {
  int index;
  MPI_Comm comm;
  long deletes, errors;
};

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static int live[NTHREADS];    /* the key each thread holds (valid while has_live) */
static int has_live[NTHREADS];

static int thread_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval;
  struct thread_state* st = extra;
  ++st->deletes;
  if (comm != st->comm || (size_t)value != (size_t)(st->index + 1)) ++st->errors;
  return MPI_SUCCESS;
}

/* Counts an error if a thread (other than `self`, unless self < 0) holds `key`; then, if self >= 0,
 * records that `self` holds it. */
static void check_held(struct thread_state* st, int key, int self) {
  pthread_mutex_lock(&live_mu);
  for (int t = 0; t < NTHREADS; ++t)
    if (t != self && has_live[t] && live[t] == key) ++st->errors;
  if (self >= 0) {
    live[self] = key;
    has_live[self] = 1;
  }
  pthread_mutex_unlock(&live_mu);
}

static void* worker(void* arg) {
  struct thread_state* st = arg;
  for (int round = 0; round < ROUNDS; ++round) {
    int key;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, thread_delete, &key, st) != MPI_SUCCESS) {
      ++st->errors;
      continue;
    }
    check_held(st, key, st->index);
    for (int i = 0; i < CHURN; ++i) { /* more churn: more overlap in the quarantine */
      int other;
      if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &other, NULL) != MPI_SUCCESS) {
        ++st->errors;
        continue;
      }
      check_held(st, other, -1);
      if (MPI_Comm_free_keyval(&other) != MPI_SUCCESS) ++st->errors;
    }
    if (MPI_Comm_set_attr(st->comm, key, (void*)(size_t)(st->index + 1)) != MPI_SUCCESS) ++st->errors;
    void* got = NULL;
    int flag = 0;
    MPI_Comm_get_attr(st->comm, key, &got, &flag);
    if (!flag || (size_t)got != (size_t)(st->index + 1)) ++st->errors;
    if (MPI_Comm_delete_attr(st->comm, key) != MPI_SUCCESS) ++st->errors;
    pthread_mutex_lock(&live_mu);
    has_live[st->index] = 0;
    pthread_mutex_unlock(&live_mu);
    if (MPI_Comm_free_keyval(&key) != MPI_SUCCESS || key != MPI_KEYVAL_INVALID) ++st->errors;
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("thread_multiple_keyval_churn: MPI_THREAD_MULTIPLE not provided\n");
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  struct thread_state states[NTHREADS];
  pthread_t threads[NTHREADS];
  for (int i = 0; i < NTHREADS; ++i) {
    states[i] = (struct thread_state){i, MPI_COMM_NULL, 0, 0};
    MPI_Comm_dup(MPI_COMM_SELF, &states[i].comm);
    MPI_Comm_set_errhandler(states[i].comm, MPI_ERRORS_RETURN);
  }
  for (int i = 0; i < NTHREADS; ++i) pthread_create(&threads[i], NULL, worker, &states[i]);
  for (int i = 0; i < NTHREADS; ++i) pthread_join(threads[i], NULL);

  int all_ok = 1;
  for (int i = 0; i < NTHREADS; ++i) {
    all_ok &= states[i].deletes == ROUNDS && states[i].errors == 0;
    printf("thread_multiple_keyval_churn: thread %d: deletes %ld, errors %ld\n", i, states[i].deletes,
           states[i].errors);
    MPI_Comm_free(&states[i].comm);
  }
  printf("thread_multiple_keyval_churn: %d threads x %d rounds, all counts exact %d\n", NTHREADS, ROUNDS, all_ok);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
