/* MPI microbenchmark of attribute calls: run it natively and under attrcheck's modes (see
 * scripts/bench-mpi.sh, which runs all of them in one go and prints ratios, and
 * scripts/bench-callgrind.sh, which counts instructions per call).
 *
 * Every operation is measured in two keyval configurations: "[user]", keyvals created with
 * user callbacks (dup_copy / noop_delete below), and "[predefined]", keyvals created with
 * MPI_COMM_DUP_FN / MPI_COMM_NULL_DELETE_FN. The operations: get and set (replace) of one of
 * 64 attributes on a duplicate of MPI_COMM_WORLD, set + delete of one attribute on
 * MPI_COMM_SELF, dup + free of a communicator holding 64 attributes, keyval create + free.
 * Prints one line per operation and configuration: "op <name> [<config>] ns <best ns per op>".
 *
 * Then, for get and set in each configuration, a paired measurement inside this one process:
 * the library itself (PMPI_ calls on keyvals made with PMPI_, which the tool never sees)
 * against the same call through MPI_ (the tool's wrapper when it is preloaded), in short
 * alternating blocks on one communicator, so that machine noise hits both alike. Prints
 * "pair <name> [<config>] library_ns <ns> tool_ns <ns> ratio <median of the blocks' ratios>".
 * Natively MPI_ is the library, so the ratio is ~1: a check of the method.
 *
 * Keyval create + free is measured in the steady state: before its runs, the benchmark creates
 * and frees KEYVAL_WARMUP keyvals (outside bench_keyval_*, so a profiler does not count them, and
 * the same number in every run, so that scripts/bench-callgrind.sh's N / 2N difference cancels
 * them). That is more than attrcheck's shadow mode holds back in its quarantine of freed keyvals
 * (src/runtime/process/keyvals.cpp), whose library frees only begin once it is full: a run shorter than
 * that would measure the creates and frees without the releases that every later free pays.
 *
 * Usage: mpi_attr_bench [SCALE] [--count N] [--only OP:CONFIG] [--no-pairs] [--thread LEVEL]
 *   SCALE       multiplies every iteration count (default 1).
 *   --count N   run each operation exactly N times, once (no repeats), and the paired blocks
 *               N iterations each: for instruction counting (each operation runs inside its
 *               own function, bench_<op>_<config>, so a profiler can attribute it) and tests.
 *   --only S    run only the operation S, e.g. get:user, setdel:predefined (ops: get set
 *               setdel dupfree keyval; configs: user predefined); no paired measurement.
 *   --no-pairs  skip the paired measurement.
 *   --thread L  initialise with MPI_Init_thread at level L (single, funneled, serialized,
 *               multiple) instead of MPI_Init; the calls are still made from one thread. Fails
 *               if the library provides less. Prints "thread <level provided>".  */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KEYS = 64, REPEATS = 7, KEYVAL_WARMUP = 16384 };

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

/* One keyval configuration and the objects its operations use. */
struct config {
  const char* name;
  MPI_Comm_copy_attr_function* copy;
  MPI_Comm_delete_attr_function* del;
  MPI_Comm comm;   /* a duplicate of MPI_COMM_WORLD holding KEYS attributes */
  int keys[KEYS];
  int single;      /* the keyval of set + delete on MPI_COMM_SELF */
};
static struct config configs[2];
static volatile long sink;

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

/* The operations: each body runs `n` iterations and returns the seconds they took. */
static inline __attribute__((always_inline)) double get_body(struct config* c, long n) {
  void* v = NULL;
  int flag = 0;
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; ++i) {
    MPI_Comm_get_attr(c->comm, c->keys[i & (KEYS - 1)], &v, &flag);
    sink += (long)v;
  }
  return MPI_Wtime() - t0;
}
static inline __attribute__((always_inline)) double set_body(struct config* c, long n) {
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; ++i) MPI_Comm_set_attr(c->comm, c->keys[i & (KEYS - 1)], (void*)(i + 1));
  return MPI_Wtime() - t0;
}
static inline __attribute__((always_inline)) double setdel_body(struct config* c, long n) {
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; ++i) {
    MPI_Comm_set_attr(MPI_COMM_SELF, c->single, (void*)(i + 1));
    MPI_Comm_delete_attr(MPI_COMM_SELF, c->single);
  }
  return MPI_Wtime() - t0;
}
static inline __attribute__((always_inline)) double dupfree_body(struct config* c, long n) {
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; ++i) {
    MPI_Comm c2;
    MPI_Comm_dup(c->comm, &c2);
    MPI_Comm_free(&c2);
  }
  return MPI_Wtime() - t0;
}
static inline __attribute__((always_inline)) double keyval_body(struct config* c, long n) {
  const double t0 = MPI_Wtime();
  for (long i = 0; i < n; ++i) {
    int k;
    MPI_Comm_create_keyval(c->copy, c->del, &k, NULL);
    MPI_Comm_free_keyval(&k);
  }
  return MPI_Wtime() - t0;
}

/* Brings keyval create + free to its steady state (see the header); not a bench_ function. */
__attribute__((noinline)) static void keyval_warmup(struct config* c) {
  for (long i = 0; i < KEYVAL_WARMUP; ++i) {
    int k;
    MPI_Comm_create_keyval(c->copy, c->del, &k, NULL);
    MPI_Comm_free_keyval(&k);
  }
}

/* One out-of-line function per operation and configuration, so that callgrind's inclusive
   cost of bench_<op>_<config> is that operation's (scripts/bench-callgrind.sh). */
#define VARIANTS(op)                                                                          \
  __attribute__((noinline, used)) double bench_##op##_user(long n) { return op##_body(&configs[0], n); } \
  __attribute__((noinline, used)) double bench_##op##_predefined(long n) {                   \
    return op##_body(&configs[1], n);                                                         \
  }
VARIANTS(get)
VARIANTS(set)
VARIANTS(setdel)
VARIANTS(dupfree)
VARIANTS(keyval)

static const struct {
  const char* id;
  const char* label;
  long iters;  /* per repeat, at SCALE 1 */
  double (*fn[2])(long);
} ops[] = {
    {"get", "get", 2000000, {bench_get_user, bench_get_predefined}},
    {"set", "set", 1000000, {bench_set_user, bench_set_predefined}},
    {"setdel", "set+delete", 1000000, {bench_setdel_user, bench_setdel_predefined}},
    {"dupfree", "dup+free (64 attrs)", 5000, {bench_dupfree_user, bench_dupfree_predefined}},
    {"keyval", "keyval create+free", 500000, {bench_keyval_user, bench_keyval_predefined}},
};

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
    printf("pair %-34s library_ns %8.1f tool_ns %8.1f ratio %6.3f\n", name,        \
           best_ns(lib_ns, PAIRS), best_ns(tool_ns, PAIRS), median(ratio, PAIRS));  \
  } while (0)

/* The paired measurement for one configuration, on its own communicator: 64 attributes the
   library holds alone and 64 set through the tool, all with the configuration's callbacks. */
static void paired(struct config* c, long scale, long count) {
  MPI_Comm pcomm;
  MPI_Comm_dup(MPI_COMM_WORLD, &pcomm);
  int lib_keys[KEYS], tool_keys[KEYS];
  for (int k = 0; k < KEYS; ++k) {
    PMPI_Comm_create_keyval(c->copy, c->del, &lib_keys[k], NULL);
    PMPI_Comm_set_attr(pcomm, lib_keys[k], (void*)(long)(k + 1));
    MPI_Comm_create_keyval(c->copy, c->del, &tool_keys[k], NULL);
    MPI_Comm_set_attr(pcomm, tool_keys[k], (void*)(long)(k + 1));
  }
  void* v = NULL;
  int flag = 0;
  char name[64];
  snprintf(name, sizeof name, "get [%s]", c->name);
  PAIRED(name, count ? count : 20000 * scale, {
    PMPI_Comm_get_attr(pcomm, lib_keys[i & (KEYS - 1)], &v, &flag);
    sink += (long)v;
  }, {
    MPI_Comm_get_attr(pcomm, tool_keys[i & (KEYS - 1)], &v, &flag);
    sink += (long)v;
  });
  snprintf(name, sizeof name, "set [%s]", c->name);
  PAIRED(name, count ? count : 10000 * scale, PMPI_Comm_set_attr(pcomm, lib_keys[i & (KEYS - 1)], (void*)(i + 1)),
         MPI_Comm_set_attr(pcomm, tool_keys[i & (KEYS - 1)], (void*)(i + 1)));
  MPI_Comm_free(&pcomm);
  for (int k = 0; k < KEYS; ++k) {
    PMPI_Comm_free_keyval(&lib_keys[k]);
    MPI_Comm_free_keyval(&tool_keys[k]);
  }
}

static int usage(void) {
  fprintf(stderr, "usage: mpi_attr_bench [SCALE] [--count N] [--only OP:CONFIG] [--no-pairs] [--thread LEVEL]\n");
  return 2;
}

static const char* const level_names[] = {"single", "funneled", "serialized", "multiple"};
static const int levels[] = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED, MPI_THREAD_MULTIPLE};

/* The index of a thread level's name in level_names, or -1. */
static int level_index(const char* name) {
  for (int i = 0; i < 4; ++i)
    if (!strcmp(name, level_names[i])) return i;
  return -1;
}

int main(int argc, char** argv) {
  /* The thread level is read first: MPI is initialised at it. */
  int level = -1;
  for (int a = 1; a + 1 < argc; ++a)
    if (!strcmp(argv[a], "--thread")) {
      level = level_index(argv[a + 1]);
      if (level < 0) return usage();
    }
  if (level < 0) {
    MPI_Init(&argc, &argv);
  } else {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, levels[level], &provided);
    if (provided < levels[level]) {
      fprintf(stderr, "mpi_attr_bench: MPI provides thread level %d, below %s\n", provided, level_names[level]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    printf("thread %s\n", level_names[level]);
  }
  long scale = 1, count = 0;
  const char* only = NULL;
  int pairs = 1;
  for (int a = 1; a < argc; ++a) {
    if (!strcmp(argv[a], "--count") && a + 1 < argc) count = atol(argv[++a]);
    else if (!strcmp(argv[a], "--only") && a + 1 < argc) only = argv[++a];
    else if (!strcmp(argv[a], "--no-pairs")) pairs = 0;
    else if (!strcmp(argv[a], "--thread") && a + 1 < argc) ++a;  /* (read above) */
    else if (argv[a][0] != '-') scale = atol(argv[a]);
    else { MPI_Finalize(); return usage(); }
  }
  if (scale < 1 || count < 0) { MPI_Finalize(); return usage(); }

  configs[0] = (struct config){.name = "user", .copy = dup_copy, .del = noop_delete};
  configs[1] = (struct config){.name = "predefined", .copy = MPI_COMM_DUP_FN, .del = MPI_COMM_NULL_DELETE_FN};
  for (int c = 0; c < 2; ++c) {
    struct config* cf = &configs[c];
    MPI_Comm_dup(MPI_COMM_WORLD, &cf->comm);
    for (int k = 0; k < KEYS; ++k) {
      MPI_Comm_create_keyval(cf->copy, cf->del, &cf->keys[k], NULL);
      MPI_Comm_set_attr(cf->comm, cf->keys[k], (void*)(long)(k + 1));
    }
    MPI_Comm_create_keyval(cf->copy, cf->del, &cf->single, NULL);
  }

  int ran = 0;
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; ++o) {
    for (int c = 0; c < 2; ++c) {
      char id[64], name[64];
      snprintf(id, sizeof id, "%s:%s", ops[o].id, configs[c].name);
      if (only && strcmp(only, id)) continue;
      ran = 1;
      const long iters = count ? count : ops[o].iters * scale;
      const int repeats = count ? 1 : REPEATS;
      double s[REPEATS];
      if (!strcmp(ops[o].id, "keyval")) keyval_warmup(&configs[c]);
      for (int r = 0; r < repeats; ++r) s[r] = ops[o].fn[c](iters) * 1e9 / (double)iters;
      snprintf(name, sizeof name, "%s [%s]", ops[o].label, configs[c].name);
      printf("op %-34s ns %10.1f\n", name, best_ns(s, repeats));
    }
  }
  if (only && !ran) {
    fprintf(stderr, "mpi_attr_bench: no operation %s\n", only);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (pairs && !only)
    for (int c = 0; c < 2; ++c) paired(&configs[c], scale, count);

  for (int c = 0; c < 2; ++c) {
    MPI_Comm_free(&configs[c].comm);
    for (int k = 0; k < KEYS; ++k) MPI_Comm_free_keyval(&configs[c].keys[k]);
    MPI_Comm_free_keyval(&configs[c].single);
  }
  if (sink == 42) printf("#\n");
  MPI_Finalize();
  return 0;
}
