// attrcheck-test: np=2 modes=shadow,emulate
// expect: thread.level
// clean
// exit: 0
/* thread.level: MPI_Init (MPI_THREAD_SINGLE), then attribute calls from the main thread and,
 * afterwards (strictly one after the other), from a second pthread. The second thread's
 * attribute calls are refused (the call returns an error, the attribute is untouched); its dup
 * and free of a communicator go to the library unmirrored, so they still work. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

static int key;
static int seen_in_thread = 0;
static int get_rc = -1, set_rc = -1, dup_rc = -1, free_rc = -1;

static void* worker(void* arg) {
  (void)arg;
  void* got = NULL;
  int flag = 0;
  get_rc = MPI_Comm_get_attr(MPI_COMM_SELF, key, &got, &flag); /* BUG: not the main thread */
  set_rc = MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)2);     /* BUG */
  seen_in_thread = flag && got == (void*)1;
  MPI_Comm d;
  dup_rc = MPI_Comm_dup(MPI_COMM_SELF, &d); /* BUG too, but passed on */
  if (dup_rc == MPI_SUCCESS) free_rc = MPI_Comm_free(&d);
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
  void* now = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_SELF, key, &now, &flag);
  MPI_Comm_delete_attr(MPI_COMM_SELF, key);
  MPI_Comm_free_keyval(&key);

  if (rank == 0)
    printf("thread_level: thread read the attribute %d; get %s, set %s, dup %d, free %d; value %ld\n",
           seen_in_thread, get_rc == MPI_SUCCESS ? "passed" : "refused", set_rc == MPI_SUCCESS ? "passed" : "refused",
           dup_rc, free_rc, (long)now);
  MPI_Finalize();
  /* Refused: the attribute calls. Passed on: dup and free. The set did not happen. */
  return get_rc != MPI_SUCCESS && set_rc != MPI_SUCCESS && dup_rc == MPI_SUCCESS && free_rc == MPI_SUCCESS &&
                 flag && now == (void*)1
             ? 0
             : 1;
}
