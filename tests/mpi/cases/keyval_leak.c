// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.leak
// rank-symbolized: keyval.leak main keyval_leak.c
// clean
// exit: 0
/* keyval.leak: a keyval created and never freed (its attribute is deleted properly). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void*)42);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
  /* BUG: MPI_Comm_free_keyval(&key) is missing. */

  if (rank == 0) printf("keyval_leak: done\n");
  MPI_Finalize();
  return 0;
}
