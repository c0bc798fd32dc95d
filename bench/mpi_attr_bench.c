/* MPI microbenchmark of attribute calls: run it natively and under attrcheck's modes (see
 * scripts/bench-mpi.sh, which runs all of them in one go and prints ratios).
 * Prints one line per operation: "op <name> ns <best ns per op>". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KEYS = 64, REPEATS = 7 };

static int dup_copy(MPI_Comm c, int k, void* e, void* in, void* out, int* flag) {
  (void)c; (void)k; (void)e;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int noop_delete(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)v; (void)e;
  return MPI_SUCCESS;
}

static double best_ns(double* samples, int n) {
  double best = samples[0];
  for (int i = 1; i < n; ++i) if (samples[i] < best) best = samples[i];
  return best;
}

#define TIME(name, iters, setup, body)                                    \
  do {                                                                    \
    double s[REPEATS];                                                    \
    for (int r = 0; r < REPEATS; ++r) {                                   \
      setup;                                                              \
      const double t0 = MPI_Wtime();                                      \
      for (long i = 0; i < (iters); ++i) { body; }                        \
      s[r] = (MPI_Wtime() - t0) * 1e9 / (double)(iters);                  \
    }                                                                     \
    printf("op %-22s ns %10.1f\n", name, best_ns(s, REPEATS));            \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  long scale = argc > 1 ? atol(argv[1]) : 1;
  int keys[KEYS];
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  for (int k = 0; k < KEYS; ++k) {
    MPI_Comm_create_keyval(dup_copy, noop_delete, &keys[k], NULL);
    MPI_Comm_set_attr(comm, keys[k], (void*)(long)(k + 1));
  }
  void* v = NULL;
  int flag = 0;
  volatile long sink = 0;

  TIME("get", 2000000 * scale, (void)0, {
    MPI_Comm_get_attr(comm, keys[i & (KEYS - 1)], &v, &flag);
    sink += (long)v;
  });
  TIME("set", 1000000 * scale, (void)0, MPI_Comm_set_attr(comm, keys[i & (KEYS - 1)], (void*)i));

  int plain;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &plain, NULL);
  TIME("set+delete", 1000000 * scale, (void)0, {
    MPI_Comm_set_attr(comm, plain, (void*)i);
    MPI_Comm_delete_attr(comm, plain);
  });
  MPI_Comm_free_keyval(&plain);

  TIME("dup+free (64 attrs)", 5000 * scale, (void)0, {
    MPI_Comm c2;
    MPI_Comm_dup(comm, &c2);
    MPI_Comm_free(&c2);
  });
  TIME("keyval create+free", 500000 * scale, (void)0, {
    int k;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL);
    MPI_Comm_free_keyval(&k);
  });

  MPI_Comm_free(&comm);
  for (int k = 0; k < KEYS; ++k) MPI_Comm_free_keyval(&keys[k]);
  if (sink == 42) printf("#\n");
  MPI_Finalize();
  return 0;
}
