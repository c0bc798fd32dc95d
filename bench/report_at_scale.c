/* The program bench/report_at_scale.py runs at 16, 64 and 256 ranks: each rank makes FINDINGS
   distinct findings, half of them the same on every rank (keyvals it never frees: keyval.leak,
   found at MPI_Finalize, with the same numbers everywhere) and half its own (a get with a keyval
   number that was never created and that no other rank uses: keyval.unknown, found as the call
   is made; natively the library returns an error). It prints how long its MPI_Finalize took, in
   seconds.

   usage: report_at_scale FINDINGS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int findings = argc > 1 ? atoi(argv[1]) : 0;
  const int unique = findings / 2, common = findings - unique;
  int key;
  for (int i = 0; i < common; ++i) /* leaked: the same numbers on every rank */
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  for (int i = 0; i < unique; ++i) { /* never created: numbers this rank alone uses */
    void *value = NULL;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_SELF, 1000000 + rank * unique + i, &value, &flag);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  MPI_Finalize();
  const double t1 = now();
  printf("finalize %d %.6f\n", rank, t1 - t0);
  return 0;
}
