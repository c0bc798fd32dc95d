// attrcheck-test: np=2 modes=shadow,emulate
// expect: attr.leak
// clean
// exit: 0
/* attr.leak: an attribute with a user delete callback on a duplicated communicator that is never
 * freed, so the callback never runs. The keyval itself is freed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int release(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  free(value);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, release, &key, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int* buffer = malloc(16 * sizeof *buffer);
  MPI_Comm_set_attr(comm, key, buffer);
  MPI_Comm_free_keyval(&key);
  /* BUG: comm is never freed, so release() never runs for buffer. */

  if (rank == 0) printf("attr_leak: done\n");
  MPI_Finalize();
  return 0;
}
