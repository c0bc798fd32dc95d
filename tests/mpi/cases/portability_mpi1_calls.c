// attrcheck-test: np=1 modes=shadow,emulate
// expect: deprecated.call
// expect-portable-on openmpi: portability.standard-abi-lacks-mpi1-calls openmpi-6.0
// expect-portable-on mpich: portability.standard-abi-lacks-mpi1-calls openmpi-6.0
// clean
// exit: 0
// native: same-stdout
/* The MPI-1 caching calls: deprecated everywhere, and missing from Open MPI 6.0's MPI standard
 * ABI library (libmpi_abi.so.1), where a program built for the standard ABI that calls them does
 * not link. (Built for the standard ABI, this case runs on MPICH's libmpi_abi, which has them.) */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int key, flag = 0;
  void* value = NULL;
  static int payload = 5;
  MPI_Keyval_create(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Attr_put(MPI_COMM_WORLD, key, &payload);
  MPI_Attr_get(MPI_COMM_WORLD, key, &value, &flag);
  printf("found %d\n", flag);
  MPI_Attr_delete(MPI_COMM_WORLD, key);
  MPI_Keyval_free(&key);
  MPI_Finalize();
  return 0;
}
