/* MPI microbenchmark of attribute calls: run it natively and under attrcheck's modes (see
 * scripts/bench-mpi.sh, which runs all of them in one go and prints ratios).
 * Prints one line per operation: "op <name> ns <best ns per op>".
 *
 * Then, for get and set, a paired measurement inside this one process: the library itself
 * (PMPI_ calls on keyvals made with PMPI_, which the tool never sees) against the same call
 * through MPI_ (the tool's wrapper when it is preloaded), in short alternating blocks on one
 * communicator, so that machine noise hits both alike. Prints
 * "pair <name> library_ns <ns> tool_ns <ns> ratio <median of the blocks' ratios>".
 * Natively MPI_ is the library, so the ratio is ~1: a check of the method. */
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

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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

enum { PAIRS = 41 };

/* Alternating blocks of `lib` and `tool` (which goes first alternates too). */
#define PAIRED(name, iters, lib, tool)                                              \
  do {                                                                              \
    double ratio[PAIRS], lib_ns[PAIRS], tool_ns[PAIRS];                             \
    for (int r = 0; r < PAIRS; ++r) {                                               \
      for (int half = 0; half < 2; ++half) {                                        \
        const int use_tool = (half + r) % 2;                                        \
        const double t0 = MPI_Wtime();                                              \
        if (use_tool) {                                                             \
          for (long i = 0; i < (iters); ++i) { tool; }                              \
        } else {                                                                    \
          for (long i = 0; i < (iters); ++i) { lib; }                               \
        }                                                                           \
        const double ns = (MPI_Wtime() - t0) * 1e9 / (double)(iters);               \
        if (use_tool) tool_ns[r] = ns; else lib_ns[r] = ns;                         \
      }                                                                             \
      ratio[r] = tool_ns[r] / lib_ns[r];                                            \
    }                                                                               \
    printf("pair %-22s library_ns %8.1f tool_ns %8.1f ratio %6.3f\n", name,        \
           best_ns(lib_ns, PAIRS), best_ns(tool_ns, PAIRS), median(ratio, PAIRS));  \
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

  /* The paired measurement, on its own communicator: 64 attributes the library holds alone
     and 64 set through the tool, all with a delete callback. */
  MPI_Comm pcomm;
  MPI_Comm_dup(MPI_COMM_WORLD, &pcomm);
  int lib_keys[KEYS], tool_keys[KEYS];
  for (int k = 0; k < KEYS; ++k) {
    PMPI_Comm_create_keyval(dup_copy, noop_delete, &lib_keys[k], NULL);
    PMPI_Comm_set_attr(pcomm, lib_keys[k], (void*)(long)(k + 1));
    MPI_Comm_create_keyval(dup_copy, noop_delete, &tool_keys[k], NULL);
    MPI_Comm_set_attr(pcomm, tool_keys[k], (void*)(long)(k + 1));
  }
  PAIRED("get", 20000 * scale, {
    PMPI_Comm_get_attr(pcomm, lib_keys[i & (KEYS - 1)], &v, &flag);
    sink += (long)v;
  }, {
    MPI_Comm_get_attr(pcomm, tool_keys[i & (KEYS - 1)], &v, &flag);
    sink += (long)v;
  });
  PAIRED("set", 10000 * scale, PMPI_Comm_set_attr(pcomm, lib_keys[i & (KEYS - 1)], (void*)i),
         MPI_Comm_set_attr(pcomm, tool_keys[i & (KEYS - 1)], (void*)i));
  MPI_Comm_free(&pcomm);
  for (int k = 0; k < KEYS; ++k) {
    PMPI_Comm_free_keyval(&lib_keys[k]);
    MPI_Comm_free_keyval(&tool_keys[k]);
  }

  MPI_Comm_free(&comm);
  for (int k = 0; k < KEYS; ++k) MPI_Comm_free_keyval(&keys[k]);
  if (sink == 42) printf("#\n");
  MPI_Finalize();
  return 0;
}
