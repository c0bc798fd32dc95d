// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE: threads duplicating and freeing communicators as fast as they can, each
 * its own. MPICH hands a freed handle out again at once, so one thread's dup often returns the
 * handle another thread is freeing at that moment: in shadow mode the tool mirrors a free after
 * the library's (it replays the delete callbacks the library ran), and the new object's
 * registration must not be confused with the old one's (it used to drop one or the other:
 * impl.divergence object-unknown at MPI_Comm_free, or a later call on the new handle refused).
 * Each duplicate carries an attribute whose copy and delete callbacks are counted; the counts
 * must be exact. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

enum { THREADS = 3, ROUNDS = 1500 };

static int key;
static long copies[THREADS], deletes[THREADS], wrong[THREADS];

static int copy_counted(MPI_Comm c, int k, void* extra, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)extra;
  ++copies[(long)in];
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_counted(MPI_Comm c, int k, void* value, void* extra) {
  (void)c; (void)k; (void)extra;
  ++deletes[(long)value];
  return MPI_SUCCESS;
}

static MPI_Comm parents[THREADS];

static void* churn(void* arg) {
  const long id = (long)arg;
  for (int r = 0; r < ROUNDS; ++r) {
    MPI_Comm c;
    MPI_Comm_dup(parents[id], &c);
    void* v = NULL;
    int flag = 0;
    MPI_Comm_get_attr(c, key, &v, &flag);
    wrong[id] += !flag || (long)v != id;
    if (MPI_Comm_free(&c) != MPI_SUCCESS) ++wrong[id];
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
  MPI_Comm_create_keyval(copy_counted, delete_counted, &key, NULL);
  for (long t = 0; t < THREADS; ++t) {
    MPI_Comm_dup(MPI_COMM_SELF, &parents[t]);
    MPI_Comm_set_attr(parents[t], key, (void*)t);
  }
  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; ++t) pthread_create(&threads[t], NULL, churn, (void*)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  for (int t = 0; t < THREADS; ++t) {
    MPI_Comm_free(&parents[t]);
    printf("thread %d: %ld copies, %ld deletes, %ld wrong\n", t, copies[t], deletes[t], wrong[t]);
  }
  MPI_Comm_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
