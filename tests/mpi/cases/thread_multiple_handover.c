// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE, first from one thread, then from two at once. In shadow mode sets are
 * deferred (checked at once, applied to attrcheck's engine later) while only the thread that
 * initialised MPI calls it; the first call of a second thread ends that and applies them. The
 * second thread must see the first thread's sets (gets, a delete and a set replacing one: their
 * delete callbacks get the values the first thread set, and a dup's copy callbacks), and then
 * both threads set, read and delete at once, each checking its own answers. Every answer is checked; what is printed
 * does not depend on the interleaving and must be the native run's; a model that missed a set
 * would also report impl.divergence (the case is clean). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { KEYS = 4, ROUNDS = 3000 };

static MPI_Comm shared, mine, theirs;
static int keys[KEYS];  /* user callbacks: counted per key */
static int my_key;      /* the main thread's own key, on `mine` (user delete callback) */
static long copies[KEYS], deletes[KEYS], copy_sum[KEYS], delete_sum[KEYS];
static long my_deletes;
static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;

static int copy_counted(MPI_Comm c, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)c; (void)extra;
  pthread_mutex_lock(&count_mu);
  for (int i = 0; i < KEYS; ++i)
    if (keyval == keys[i]) ++copies[i], copy_sum[i] += (long)in;
  pthread_mutex_unlock(&count_mu);
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_counted(MPI_Comm c, int keyval, void* value, void* extra) {
  (void)c; (void)extra;
  pthread_mutex_lock(&count_mu);
  if (keyval == my_key) ++my_deletes;
  for (int i = 0; i < KEYS; ++i)
    if (keyval == keys[i]) ++deletes[i], delete_sum[i] += (long)value;
  pthread_mutex_unlock(&count_mu);
  return MPI_SUCCESS;
}

static long get(MPI_Comm c, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(c, key, &v, &flag);
  return flag ? (long)v : -1;
}

static long wrong_second, wrong_main;
static pthread_cond_t read_cv = PTHREAD_COND_INITIALIZER;
static int read_done;

/* The second thread: reads what the main thread set before it started, changes it, then works
   on a communicator of its own while the main thread works on `mine`. */
static void* second(void* arg) {
  (void)arg;
  for (int i = 0; i < KEYS; ++i) wrong_second += get(shared, keys[i]) != 100 + i;
  MPI_Comm_delete_attr(shared, keys[0]);
  wrong_second += get(shared, keys[0]) != -1;
  MPI_Comm_set_attr(shared, keys[1], (void*)7);
  wrong_second += get(shared, keys[1]) != 7;
  MPI_Comm dup;
  MPI_Comm_dup(shared, &dup);
  for (int i = 1; i < KEYS; ++i) wrong_second += get(dup, keys[i]) != (i == 1 ? 7 : 100 + i);
  MPI_Comm_free(&dup);
  pthread_mutex_lock(&count_mu);
  read_done = 1;
  pthread_cond_signal(&read_cv);
  pthread_mutex_unlock(&count_mu);
  for (long r = 0; r < ROUNDS; ++r) {
    MPI_Comm_set_attr(theirs, keys[3], (void*)(r + 1));
    wrong_second += get(theirs, keys[3]) != r + 1;
    if (r % 3 == 0) {
      MPI_Comm_delete_attr(theirs, keys[3]);
      wrong_second += get(theirs, keys[3]) != -1;
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("MPI_THREAD_MULTIPLE not provided\n");
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_dup(MPI_COMM_SELF, &shared);
  MPI_Comm_dup(MPI_COMM_SELF, &mine);
  MPI_Comm_dup(MPI_COMM_SELF, &theirs);
  for (int i = 0; i < KEYS; ++i) MPI_Comm_create_keyval(copy_counted, delete_counted, &keys[i], NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_counted, &my_key, NULL);
  /* Runs of sets while only this thread calls (each replacing the one before), on `mine`, then
     on `shared`: the last ones still pending when the second thread starts. */
  for (long r = 0; r < 10; ++r) MPI_Comm_set_attr(mine, my_key, (void*)(r + 1));
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < KEYS; ++i) MPI_Comm_set_attr(shared, keys[i], (void*)(long)(round == 2 ? 100 + i : i + round));
  pthread_t t;
  pthread_create(&t, NULL, second, NULL);
  /* This thread makes no MPI call until the second one has read and changed what it set (so
     the second thread's calls are the ones that find the sets pending). */
  pthread_mutex_lock(&count_mu);
  while (!read_done) pthread_cond_wait(&read_cv, &count_mu);
  pthread_mutex_unlock(&count_mu);
  wrong_main += get(mine, my_key) != 10;
  /* Then both at once: sets, gets and deletes of this thread's own attribute. */
  for (long r = 0; r < ROUNDS; ++r) {
    MPI_Comm_set_attr(mine, my_key, (void*)(r + 100));
    wrong_main += get(mine, my_key) != r + 100;
    if (r % 5 == 0) {
      MPI_Comm_delete_attr(mine, my_key);
      wrong_main += get(mine, my_key) != -1;
    }
  }
  pthread_join(t, NULL);
  for (int i = 1; i < KEYS; ++i) wrong_main += get(shared, keys[i]) != (i == 1 ? 7 : 100 + i);
  printf("wrong answers: second thread %ld, main thread %ld\n", wrong_second, wrong_main);
  for (int i = 0; i < KEYS; ++i)
    printf("key %d: %ld copy callbacks (values summing to %ld), %ld delete callbacks (%ld)\n", i, copies[i],
           copy_sum[i], deletes[i], delete_sum[i]);
  printf("main's key: %ld delete callbacks\n", my_deletes);
  MPI_Comm_free(&shared);
  MPI_Comm_free(&mine);
  MPI_Comm_free(&theirs);
  for (int i = 0; i < KEYS; ++i) MPI_Comm_free_keyval(&keys[i]);
  MPI_Comm_free_keyval(&my_key);
  printf("after the frees: main's key %ld delete callbacks\n", my_deletes);
  for (int i = 0; i < KEYS; ++i) printf("key %d: %ld delete callbacks (%ld)\n", i, deletes[i], delete_sum[i]);
  MPI_Finalize();
  return 0;
}
