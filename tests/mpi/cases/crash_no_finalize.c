// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.double-free
// expect-where: keyval.double-free main
// rank-symbolized: none
// clean
// exit: signal
/* The report survives a crash: the program caches attributes, makes an erroneous call (a keyval
 * freed twice), then dies of SIGSEGV outside any callback, without MPI_Finalize. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, key, (void*)1);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)2);

  int other;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &other, NULL);
  const int saved = other;
  MPI_Comm_free_keyval(&other);
  MPI_Comm_free_keyval((int*)&saved); /* BUG: double free */

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    printf("crash_no_finalize: raising SIGSEGV\n");
    fflush(stdout);
  }
  raise(SIGSEGV);

  printf("crash_no_finalize: not reached\n");
  MPI_Finalize();
  return 0;
}
