// attrcheck-test: np=1 modes=shadow,emulate
// divergence: type-free-defers-delete-callbacks
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE: one thread frees a datatype with an attribute while its duplicate lives,
 * then the duplicate; MPI libraries (a known divergence) destroy the original, run its delete
 * callback and release its handle only inside the duplicate's free. Meanwhile two other threads
 * make and free contiguous datatypes, and a library that hands released handles out again at once
 * (MPICH) gives one of them the duplicate's handle and the other the original's. In shadow mode the duplicate's free is mirrored after the
 * library returns: the released handle must stay held until then, or the other thread's new
 * datatype is registered under it first and the original's delete callback is taken for one run
 * on the new datatype (impl.divergence "ran a delete callback on datatype that the standard does
 * not call here"). To make that window wide, this program interposes on the library's own
 * PMPI_Type_free (which only a tool calls) and sleeps after it returns. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

enum { ROUNDS = 300 };

int PMPI_Type_free(MPI_Datatype* type) {
  typedef int (*Fn)(MPI_Datatype*);
  static Fn real;
  if (!real) real = (Fn)dlsym(RTLD_NEXT, "PMPI_Type_free");
  const int rc = real(type);
  usleep(100);
  return rc;
}

static int key;
static long deletes, failures, done;

static int type_copy(MPI_Datatype t, int k, void* extra, void* in, void* out, int* flag) {
  (void)t; (void)k; (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int type_delete(MPI_Datatype t, int k, void* value, void* extra) {
  (void)t; (void)k; (void)value; (void)extra;
  __atomic_add_fetch(&deletes, 1, __ATOMIC_RELAXED);
  return MPI_SUCCESS;
}
static void fail(int rc) {
  if (rc != MPI_SUCCESS) __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

static void* freer(void* arg) {
  (void)arg;
  for (int i = 0; i < ROUNDS; ++i) {
    MPI_Datatype t, copy;
    fail(MPI_Type_contiguous(2, MPI_INT, &t));
    fail(MPI_Type_set_attr(t, key, (void*)1));
    fail(MPI_Type_dup(t, &copy));
    fail(MPI_Type_free(&t));
    fail(MPI_Type_free(&copy));
  }
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void* maker(void* arg) {
  (void)arg;
  while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    MPI_Datatype t;
    fail(MPI_Type_contiguous(3, MPI_INT, &t));
    fail(MPI_Type_free(&t));
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
  MPI_Type_create_keyval(type_copy, type_delete, &key, NULL);
  pthread_t threads[3];
  pthread_create(&threads[0], NULL, freer, NULL);
  pthread_create(&threads[1], NULL, maker, NULL);
  pthread_create(&threads[2], NULL, maker, NULL);
  for (int i = 0; i < 3; ++i) pthread_join(threads[i], NULL);
  MPI_Type_free_keyval(&key);
  printf("thread_type_deferred_free_race: %ld deletes (of %d), %ld failures\n", deletes, 2 * ROUNDS, failures);
  MPI_Finalize();
  return 0;
}
