/* The program bench/report_at_scale.py runs at 16, 64 and 256 ranks: each rank makes FINDINGS
   distinct findings (keyvals it never frees: keyval.leak at MPI_Finalize), half of them the same
   on every rank (the same keyval numbers) and half its own (numbers no other rank has: its
   keyvals are made after RANK * UNIQUE others it frees before MPI_Finalize). It prints how long
   its MPI_Finalize took, in seconds.

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
  const int padding = rank * unique;
  int *pad = padding ? malloc(sizeof(int) * (size_t)padding) : NULL;
  for (int i = 0; i < padding; ++i)
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &pad[i], NULL);
  for (int i = 0; i < unique; ++i) /* leaked: numbers this rank alone has */
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  for (int i = 0; i < padding; ++i) MPI_Comm_free_keyval(&pad[i]);
  free(pad);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  MPI_Finalize();
  const double t1 = now();
  printf("finalize %d %.6f\n", rank, t1 - t0);
  return 0;
}
