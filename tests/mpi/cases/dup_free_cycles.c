// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* 1000 cycles of MPI_Comm_dup + MPI_Comm_free of a communicator carrying 8 attributes; every
 * copy and delete callback is counted and the counts must be exact. Keys 0-5 copy (with a new
 * value), keys 6-7 decline the copy. */
#include <mpi.h>
#include <stdio.h>

#define NKEYS 8
#define CYCLES 1000

static int keys[NKEYS];
static long copy_calls[NKEYS], delete_calls[NKEYS];
static int bad_values = 0;

static int key_index(int keyval) {
  for (int i = 0; i < NKEYS; ++i)
    if (keys[i] == keyval) return i;
  return -1;
}

static int counting_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm;
  const int i = key_index(keyval);
  if (i < 0 || (size_t)extra != (size_t)i || (size_t)in != (size_t)(1000 + i)) ++bad_values;
  if (i >= 0) ++copy_calls[i];
  *(void**)out = (void*)(size_t)(2000 + i);
  *flag = i < 6;
  return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm;
  const int i = key_index(keyval);
  if (i < 0 || (size_t)extra != (size_t)i) ++bad_values;
  if (i >= 0) ++delete_calls[i];
  if ((size_t)value != (size_t)(1000 + i) && (size_t)value != (size_t)(2000 + i)) ++bad_values;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  for (int i = 0; i < NKEYS; ++i) MPI_Comm_create_keyval(counting_copy, counting_delete, &keys[i], (void*)(size_t)i);
  MPI_Comm base;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  for (int i = 0; i < NKEYS; ++i) MPI_Comm_set_attr(base, keys[i], (void*)(size_t)(1000 + i));

  int wrong_reads = 0;
  for (int cycle = 0; cycle < CYCLES; ++cycle) {
    MPI_Comm c;
    MPI_Comm_dup(base, &c);
    if (cycle % 100 == 0) {
      for (int i = 0; i < NKEYS; ++i) {
        void* v = NULL;
        int flag = 0;
        MPI_Comm_get_attr(c, keys[i], &v, &flag);
        if (i < 6 ? (!flag || (size_t)v != (size_t)(2000 + i)) : flag) ++wrong_reads;
      }
    }
    MPI_Comm_free(&c);
  }
  long copies = 0, deletes_after_cycles = 0;
  for (int i = 0; i < NKEYS; ++i) copies += copy_calls[i], deletes_after_cycles += delete_calls[i];
  MPI_Comm_free(&base);
  long deletes = 0;
  int per_key_ok = 1;
  for (int i = 0; i < NKEYS; ++i) {
    deletes += delete_calls[i];
    per_key_ok &= copy_calls[i] == CYCLES && delete_calls[i] == (i < 6 ? CYCLES + 1 : 1);
  }
  for (int i = 0; i < NKEYS; ++i) MPI_Comm_free_keyval(&keys[i]);

  if (rank == 0) {
    printf("dup_free_cycles: %d cycles, %d keys\n", CYCLES, NKEYS);
    printf("dup_free_cycles: copy callbacks %ld (expected %d)\n", copies, CYCLES * NKEYS);
    printf("dup_free_cycles: delete callbacks during cycles %ld (expected %d), in all %ld (expected %d)\n",
           deletes_after_cycles, CYCLES * 6, deletes, CYCLES * 6 + NKEYS);
    printf("dup_free_cycles: per-key counts ok %d, wrong values %d, wrong reads %d\n", per_key_ok, bad_values,
           wrong_reads);
  }
  MPI_Finalize();
  return 0;
}
