// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* A dup + free of one communicator made from inside the copy and delete callbacks of another's
 * dup + free (legal: the callbacks run for the other object). Shadow mode logs the callbacks the
 * library runs for the object a dup or free is about (src/runtime/hooks/object_hooks.cpp, LogRuns):
 * the inner dup and free must neither take the outer ones' log nor lose what it holds (the outer
 * mirror would then find the library's runs missing: impl.divergence). Plain keys, whose callbacks
 * make no MPI call, are set before and after the nesting ones, so that whichever order the library
 * runs them in, some runs are logged before a nested dup or free. Every callback is counted and the
 * counts must be exact. */
#include <mpi.h>
#include <stdio.h>

#define OUTER_KEYS 4
#define PLAIN_KEYS 4
#define CYCLES 3

static MPI_Comm other;  /* carries an attribute of inner_key */
static int inner_key, outer_keys[OUTER_KEYS], plain_keys[PLAIN_KEYS];
static long inner_copies, inner_deletes, outer_copies, outer_deletes, plain_copies, plain_deletes, bad;

static int inner_copy(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)e;
  ++inner_copies;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int inner_delete(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)e;
  if ((long)v != 77) ++bad;
  ++inner_deletes;
  return MPI_SUCCESS;
}

static int plain_copy(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)e;
  ++plain_copies;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int plain_delete(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)v; (void)e;
  ++plain_deletes;
  return MPI_SUCCESS;
}

/* A dup + free of `other`, from inside a callback of another communicator's. */
static void cycle_other(void) {
  MPI_Comm d;
  MPI_Comm_dup(other, &d);
  void* v = NULL;
  int found = 0;
  MPI_Comm_get_attr(d, inner_key, &v, &found);
  if (!found || (long)v != 77) ++bad;
  MPI_Comm_free(&d);
}

static int outer_copy(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)e;
  ++outer_copies;
  cycle_other();
  *(void**)out = (void*)((long)in + 1);
  *flag = 1;
  return MPI_SUCCESS;
}
static int outer_delete(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)v; (void)e;
  ++outer_deletes;
  cycle_other();
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_create_keyval(inner_copy, inner_delete, &inner_key, NULL);
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  MPI_Comm_set_attr(other, inner_key, (void*)77L);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  for (int i = 0; i < PLAIN_KEYS; ++i) MPI_Comm_create_keyval(plain_copy, plain_delete, &plain_keys[i], NULL);
  for (int i = 0; i < PLAIN_KEYS / 2; ++i) MPI_Comm_set_attr(comm, plain_keys[i], (void*)(long)(i + 1));
  for (int i = 0; i < OUTER_KEYS; ++i) {
    MPI_Comm_create_keyval(outer_copy, outer_delete, &outer_keys[i], NULL);
    MPI_Comm_set_attr(comm, outer_keys[i], (void*)(100L * (i + 1)));
  }
  for (int i = PLAIN_KEYS / 2; i < PLAIN_KEYS; ++i) MPI_Comm_set_attr(comm, plain_keys[i], (void*)(long)(i + 1));
  for (int cycle = 0; cycle < CYCLES; ++cycle) {
    MPI_Comm d;
    MPI_Comm_dup(comm, &d);
    for (int i = 0; i < OUTER_KEYS; ++i) {
      void* v = NULL;
      int found = 0;
      MPI_Comm_get_attr(d, outer_keys[i], &v, &found);
      if (!found || (long)v != 100L * (i + 1) + 1) ++bad;
    }
    MPI_Comm_free(&d);
  }
  MPI_Comm_free(&comm);
  MPI_Comm_free(&other);
  for (int i = 0; i < OUTER_KEYS; ++i) MPI_Comm_free_keyval(&outer_keys[i]);
  for (int i = 0; i < PLAIN_KEYS; ++i) MPI_Comm_free_keyval(&plain_keys[i]);
  MPI_Comm_free_keyval(&inner_key);
  if (rank == 0)
    printf("outer copies %ld deletes %ld, inner copies %ld deletes %ld, plain copies %ld deletes %ld, bad %ld\n",
           outer_copies, outer_deletes, inner_copies, inner_deletes, plain_copies, plain_deletes, bad);
  MPI_Finalize();
  return bad != 0;
}
