// attrcheck-test: np=2 modes=shadow,emulate
// expect: thread.level
// clean
// exit: 0
/* thread.level: MPI_Init (MPI_THREAD_SINGLE), then attribute calls from the main thread and,
 * afterwards (strictly one after the other), from a second pthread. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

static int key;
static int seen_in_thread = 0;

static void* worker(void* arg) {
  (void)arg;
  void* got = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_SELF, key, &got, &flag); /* BUG: not the main thread */
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)2);     /* BUG */
  seen_in_thread = flag && got == (void*)1;
  return NULL;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)1);
  pthread_t thread;
  pthread_create(&thread, NULL, worker, NULL);
  pthread_join(thread, NULL);
  MPI_Comm_delete_attr(MPI_COMM_SELF, key);
  MPI_Comm_free_keyval(&key);

  if (rank == 0) printf("thread_level: thread read the attribute %d\n", seen_in_thread);
  MPI_Finalize();
  return 0;
}
