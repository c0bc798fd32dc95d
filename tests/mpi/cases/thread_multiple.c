// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE: 4 pthreads, each with its own keyval and its own communicators, do 200
 * rounds of create keyval / dup / set / get / dup (copy callback) / delete / free / free keyval
 * concurrently. Every callback is counted per thread, and the counts must be exact. Each thread
 * duplicates only its own parent communicator (a dup of MPI_COMM_SELF made by the main thread), so
 * the collective dups of different threads never share a communicator. (Dups of MPI_COMM_WORLD
 * from 4 threads at once are legal too, but Open MPI's context-id agreement makes them ~30 times
 * slower.) */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define NTHREADS 4
#define ROUNDS 200

struct thread_state {
  int index;
  MPI_Comm parent;
  long copies, deletes, errors;
};

static int thread_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval;
  struct thread_state* st = extra;
  ++st->copies;
  *(void**)out = (void*)((size_t)in + 1);
  *flag = 1;
  return MPI_SUCCESS;
}

static int thread_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value;
  struct thread_state* st = extra;
  ++st->deletes;
  return MPI_SUCCESS;
}

static void* worker(void* arg) {
  struct thread_state* st = arg;
  for (int round = 0; round < ROUNDS; ++round) {
    int key;
    if (MPI_Comm_create_keyval(thread_copy, thread_delete, &key, st) != MPI_SUCCESS) ++st->errors;
    MPI_Comm a, b;
    MPI_Comm_dup(st->parent, &a);
    const size_t value = (size_t)(st->index * 100000 + round * 10);
    MPI_Comm_set_attr(a, key, (void*)value);
    void* got = NULL;
    int flag = 0;
    MPI_Comm_get_attr(a, key, &got, &flag);
    if (!flag || (size_t)got != value) ++st->errors;
    MPI_Comm_dup(a, &b); /* copy callback */
    MPI_Comm_get_attr(b, key, &got, &flag);
    if (!flag || (size_t)got != value + 1) ++st->errors;
    MPI_Comm_delete_attr(a, key); /* delete callback */
    MPI_Comm_get_attr(a, key, &got, &flag);
    if (flag) ++st->errors;
    MPI_Comm_free_keyval(&key); /* still used on b */
    MPI_Comm_free(&b);          /* delete callback */
    MPI_Comm_free(&a);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) printf("thread_multiple: MPI_THREAD_MULTIPLE not provided\n");
    MPI_Finalize();
    return 0;
  }

  struct thread_state states[NTHREADS];
  pthread_t threads[NTHREADS];
  for (int i = 0; i < NTHREADS; ++i) {
    states[i] = (struct thread_state){i, MPI_COMM_NULL, 0, 0, 0};
    MPI_Comm_dup(MPI_COMM_SELF, &states[i].parent);
  }
  for (int i = 0; i < NTHREADS; ++i) pthread_create(&threads[i], NULL, worker, &states[i]);
  for (int i = 0; i < NTHREADS; ++i) pthread_join(threads[i], NULL);

  int all_ok = 1;
  for (int i = 0; i < NTHREADS; ++i) {
    all_ok &= states[i].copies == ROUNDS && states[i].deletes == 2 * ROUNDS && states[i].errors == 0;
    MPI_Comm_free(&states[i].parent);
  }
  if (rank == 0) {
    printf("thread_multiple: provided MPI_THREAD_MULTIPLE, %d threads x %d rounds\n", NTHREADS, ROUNDS);
    for (int i = 0; i < NTHREADS; ++i)
      printf("thread_multiple: thread %d: copies %ld, deletes %ld, errors %ld\n", i, states[i].copies,
             states[i].deletes, states[i].errors);
    printf("thread_multiple: all counts exact %d\n", all_ok);
  }
  MPI_Finalize();
  return 0;
}
