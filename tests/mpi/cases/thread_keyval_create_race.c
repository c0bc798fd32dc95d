// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_THREAD_MULTIPLE: two threads create and free datatype keyvals with a copy callback while two
 * others make and free contiguous datatypes. In shadow mode a constructor asks the library whether
 * its new datatype carries any live keyval's attribute (some libraries copy attributes where the
 * standard says not to), naming each keyval by the library's number. A keyval whose library create
 * had not returned yet used to be named by attrcheck's own id there, which MPICH rejects with a
 * fatal "Invalid keyval". To make that window wide, this program interposes on the library's own
 * PMPI_Type_create_keyval (which only a tool calls) and sleeps in it before creating the key. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

enum { ROUNDS = 400 };

int PMPI_Type_create_keyval(MPI_Type_copy_attr_function* copy, MPI_Type_delete_attr_function* del, int* key,
                            void* extra) {
  typedef int (*Fn)(MPI_Type_copy_attr_function*, MPI_Type_delete_attr_function*, int*, void*);
  static Fn real;
  if (!real) real = (Fn)dlsym(RTLD_NEXT, "PMPI_Type_create_keyval");
  usleep(200);
  return real(copy, del, key, extra);
}

static long failures;

static int type_copy(MPI_Datatype t, int k, void* extra, void* in, void* out, int* flag) {
  (void)t; (void)k; (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static void* creator(void* arg) {
  (void)arg;
  for (int i = 0; i < ROUNDS; ++i) {
    int key;
    if (MPI_Type_create_keyval(type_copy, MPI_TYPE_NULL_DELETE_FN, &key, NULL) != MPI_SUCCESS ||
        MPI_Type_free_keyval(&key) != MPI_SUCCESS)
      __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void* maker(void* arg) {
  (void)arg;
  for (int i = 0; i < 4 * ROUNDS; ++i) {
    MPI_Datatype t;
    if (MPI_Type_contiguous(2, MPI_INT, &t) != MPI_SUCCESS || MPI_Type_free(&t) != MPI_SUCCESS)
      __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
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
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) pthread_create(&threads[i], NULL, i % 2 ? maker : creator, NULL);
  for (int i = 0; i < 4; ++i) pthread_join(threads[i], NULL);
  printf("thread_keyval_create_race: %ld failures\n", failures);
  MPI_Finalize();
  return 0;
}
