// attrcheck-test: np=2 modes=shadow,emulate
// expect: attr.world-at-finalize
// clean
// exit: 0
/* attr.world-at-finalize: cleanup hung on MPI_COMM_WORLD with a user delete callback, left for
 * MPI_Finalize to run (Open MPI 5 no longer does). The callback makes no MPI call. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cleanup(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  free(value);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, cleanup, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, key, malloc(64)); /* BUG: relies on MPI_Finalize */
  MPI_Comm_free_keyval(&key);

  if (rank == 0) printf("attr_world_at_finalize: done\n");
  MPI_Finalize();
  return 0;
}
