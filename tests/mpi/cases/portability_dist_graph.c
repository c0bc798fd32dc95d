// attrcheck-test: np=2 modes=shadow,emulate
// expect-portable-on openmpi-5.0/shadow: portability.dist-graph-create-adjacent-copies-attributes openmpi-4.1 openmpi-6.0 mpich-4.0 mpich-4.2 mpich-5.0
// expect-portable-on openmpi-5.0/emulate: portability.dist-graph-create-adjacent-copies-attributes openmpi-5.0
// expect-portable-on openmpi-4.1: portability.dist-graph-create-adjacent-copies-attributes openmpi-5.0
// expect-portable-on openmpi-6.0: portability.dist-graph-create-adjacent-copies-attributes openmpi-5.0
// expect-portable-on mpich: portability.dist-graph-create-adjacent-copies-attributes openmpi-5.0
// divergence: dist-graph-create-adjacent-copies-attributes
// clean
// exit: 0
/* A get on a communicator from MPI_Dist_graph_create_adjacent of a keyval its old communicator
 * carries with MPI_COMM_DUP_FN: only Open MPI 5.0 copies attributes there (the standard: no cached
 * information propagates to a topology communicator), so only there the get finds it. */
#include <mpi.h>
#include <stddef.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, key, flag = 0;
  void* value = NULL;
  static int payload = 3;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm old, graph;
  MPI_Comm_dup(MPI_COMM_WORLD, &old);
  MPI_Comm_set_attr(old, key, &payload);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  MPI_Dist_graph_create_adjacent(old, 1, &prev, MPI_UNWEIGHTED, 1, &next, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph);
  MPI_Comm_get_attr(graph, key, &value, &flag); /* depends on the library */
  MPI_Comm_free(&graph);
  MPI_Comm_free(&old);
  MPI_Comm_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
