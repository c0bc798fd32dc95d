// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE: the main thread keeps making a keyval, setting an attribute with it,
 * reading it back, deleting it and freeing the keyval, while WRITERS threads do the same on their
 * own communicators. Every change moves the engine's version, so the read finds the query the
 * set just remembered without a current answer and reads the engine; some of those reads start
 * while another thread's change is under way (an odd version: more threads than CI's 2 cores, so
 * a change is sometimes preempted midway), and the answer read then cannot be kept in the cache.
 * The get must still answer what the engine holds (flag 1, the value set): the cache once
 * answered from the entry it had not filled (flag 0) in emulate mode, and in shadow mode could
 * cross-check the library's right answer against it (impl.divergence on a correct program). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define WRITERS 3
#define ROUNDS 20000 /* per writer; the main thread goes on until they are all done */

struct thread_state {
  MPI_Comm comm;
  long rounds, wrong;
};

static int running = WRITERS;

/* One round on `comm`: false if any call failed or the read did not answer the value set. */
static int round_trip(MPI_Comm comm, long value) {
  int key, ok = 1, flag = 0;
  void* got = NULL;
  if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL) != MPI_SUCCESS) return 0;
  if (MPI_Comm_set_attr(comm, key, (void*)(size_t)value) != MPI_SUCCESS) ok = 0;
  if (MPI_Comm_get_attr(comm, key, &got, &flag) != MPI_SUCCESS || !flag || (size_t)got != (size_t)value) ok = 0;
  if (MPI_Comm_delete_attr(comm, key) != MPI_SUCCESS) ok = 0;
  if (MPI_Comm_free_keyval(&key) != MPI_SUCCESS) ok = 0;
  return ok;
}

static void* writer(void* arg) {
  struct thread_state* st = arg;
  for (; st->rounds < ROUNDS; ++st->rounds)
    if (!round_trip(st->comm, st->rounds + 1)) ++st->wrong;
  __atomic_sub_fetch(&running, 1, __ATOMIC_RELEASE);
  return NULL;
}

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    printf("thread_multiple_get_while_changing: MPI_THREAD_MULTIPLE not provided\n");
    MPI_Finalize();
    return 0;
  }
  struct thread_state main_state = {MPI_COMM_NULL, 0, 0}, states[WRITERS];
  MPI_Comm_dup(MPI_COMM_SELF, &main_state.comm);
  pthread_t threads[WRITERS];
  for (int t = 0; t < WRITERS; ++t) {
    states[t] = (struct thread_state){MPI_COMM_NULL, 0, 0};
    MPI_Comm_dup(MPI_COMM_SELF, &states[t].comm);
  }
  for (int t = 0; t < WRITERS; ++t) pthread_create(&threads[t], NULL, writer, &states[t]);
  for (; __atomic_load_n(&running, __ATOMIC_ACQUIRE) || main_state.rounds < 1000; ++main_state.rounds)
    if (!round_trip(main_state.comm, main_state.rounds + 1)) ++main_state.wrong;
  long wrong = main_state.wrong, rounds = main_state.rounds;
  for (int t = 0; t < WRITERS; ++t) {
    pthread_join(threads[t], NULL);
    wrong += states[t].wrong;
    rounds += states[t].rounds;
    MPI_Comm_free(&states[t].comm);
  }
  MPI_Comm_free(&main_state.comm);
  printf("thread_multiple_get_while_changing: %d threads, wrong answers: %s\n", WRITERS + 1, wrong ? "some" : "none");
  if (wrong) fprintf(stderr, "thread_multiple_get_while_changing: %ld of %ld rounds went wrong\n", wrong, rounds);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
