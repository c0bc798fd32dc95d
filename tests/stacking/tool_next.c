/* A PMPI tool in the manner of Darshan: it wraps only MPI_Init, MPI_Init_thread and MPI_Finalize,
 * defines PMPI_Init, PMPI_Init_thread and PMPI_Finalize as aliases of those wrappers (so that a
 * program or tool calling the PMPI_ name is seen too), and passes each call to the next PMPI_
 * definition in load order (dlsym(RTLD_NEXT), normally the library's). At MPI_Finalize it writes
 * $STACK_TOOL_OUT/next.RANK.txt: "MPI_Init N" (either form) and "MPI_Finalize N". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static long init_calls, finalize_calls;

/* Sets *fn to the next definition of `name` after this library, or exits if there is none. (A
 * function pointer is stored through a void*, as POSIX's dlsym page does.) */
static void next_fn(void* fn, const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (!f) {
    fprintf(stderr, "tool_next: no %s after this library\n", name);
    exit(70);
  }
  *(void**)fn = f;
}

int MPI_Init(int* argc, char*** argv) {
  static int (*next)(int*, char***);
  if (!next) next_fn(&next, "PMPI_Init");
  ++init_calls;
  return next(argc, argv);
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  static int (*next)(int*, char***, int, int*);
  if (!next) next_fn(&next, "PMPI_Init_thread");
  ++init_calls;
  return next(argc, argv, required, provided);
}

int MPI_Finalize(void) {
  static int (*next)(void);
  if (!next) next_fn(&next, "PMPI_Finalize");
  ++finalize_calls;
  const char* dir = getenv("STACK_TOOL_OUT");
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/next.%d.txt", dir, rank);
    FILE* f = fopen(path, "w");
    if (f) {
      fprintf(f, "MPI_Init %ld\nMPI_Finalize %ld\n", init_calls, finalize_calls);
      fclose(f);
    }
  }
  return next();
}

int PMPI_Init(int* argc, char*** argv) __attribute__((alias("MPI_Init")));
int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) __attribute__((alias("MPI_Init_thread")));
int PMPI_Finalize(void) __attribute__((alias("MPI_Finalize")));
