// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_SERIALIZED: 4 pthreads take turns (a mutex) making attribute calls on one shared
 * communicator and on communicators of their own. Below MPI_THREAD_MULTIPLE attrcheck's engine
 * takes no lock, and every thread keeps its own cache of checked queries: a value one thread set
 * must be what the next thread reads. Every answer is checked against what the calls before it
 * imply, and the count of wrong ones printed: emulate mode (which answers from the caches) must
 * print what Open MPI prints, 0. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { THREADS = 4, ROUNDS = 300 };

static pthread_mutex_t turn = PTHREAD_MUTEX_INITIALIZER;
static MPI_Comm shared;
static int shared_key;
static long last_written = -1;  /* the shared attribute's value, as the last turn set it */
static int wrong[THREADS];      /* answers that were not what the calls before them imply */
static int deletes[THREADS];

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value;
  ++deletes[(long)extra];
  return MPI_SUCCESS;
}

static long get(MPI_Comm comm, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(comm, key, &v, &flag);
  return flag ? (long)v : -1;
}

static void* worker(void* arg) {
  const long id = (long)arg;
  int own_key;
  MPI_Comm own;
  pthread_mutex_lock(&turn);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &own_key, (void*)id);
  MPI_Comm_dup(MPI_COMM_SELF, &own);
  pthread_mutex_unlock(&turn);
  for (long r = 0; r < ROUNDS; ++r) {
    pthread_mutex_lock(&turn);
    wrong[id] += get(shared, shared_key) != last_written;  /* what the previous turn left */
    last_written = id * 100000 + r;
    MPI_Comm_set_attr(shared, shared_key, (void*)last_written);
    wrong[id] += get(shared, shared_key) != last_written;
    MPI_Comm_set_attr(own, own_key, (void*)r);
    wrong[id] += (get(own, own_key) != r) + (get(own, own_key) != r);
    if (r % 5 == 0) {
      MPI_Comm_delete_attr(own, own_key);
      wrong[id] += get(own, own_key) != -1;
    }
    pthread_mutex_unlock(&turn);
  }
  pthread_mutex_lock(&turn);
  MPI_Comm_free(&own);
  MPI_Comm_free_keyval(&own_key);
  pthread_mutex_unlock(&turn);
  return NULL;
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_SERIALIZED) {
    if (rank == 0) printf("MPI_THREAD_SERIALIZED not provided\n");
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_dup(MPI_COMM_SELF, &shared);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &shared_key, NULL);
  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; ++t) pthread_create(&threads[t], NULL, worker, (void*)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);

  /* The order of turns is up to the scheduler, so print what does not depend on it. */
  long delete_count = 0, wrong_count = 0;
  for (int t = 0; t < THREADS; ++t) delete_count += deletes[t], wrong_count += wrong[t];
  wrong_count += get(shared, shared_key) != last_written;
  if (rank == 0) printf("deletes %ld, wrong answers %ld\n", delete_count, wrong_count);
  MPI_Comm_free_keyval(&shared_key);
  MPI_Comm_free(&shared);
  MPI_Finalize();
  return 0;
}
