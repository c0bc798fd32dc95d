// attrcheck-test: np=2 modes=shadow,emulate
// expect: attr.world-at-finalize
// expect-portable-on openmpi-4.1: portability.world-attributes-deleted-at-finalize openmpi-5.0 openmpi-6.0
// expect-portable-on mpich: portability.world-attributes-deleted-at-finalize openmpi-5.0 openmpi-6.0
// expect-portable-on openmpi-5.0: portability.world-attributes-deleted-at-finalize openmpi-4.1 mpich-4.0 mpich-4.2 mpich-5.0
// expect-portable-on openmpi-6.0: portability.world-attributes-deleted-at-finalize openmpi-4.1 mpich-4.0 mpich-4.2 mpich-5.0
// exit: 0
/* A library that leaves its cleanup to MPI_COMM_WORLD's delete callback at MPI_Finalize: Open MPI
 * 4.1 and MPICH run it, Open MPI 5.0 and 6.0 never do (open-mpi/ompi#12035). Both modes do what
 * the library at hand does, and the portability finding names the series that do otherwise. */
#include <mpi.h>
#include <stdio.h>

static int cleaned = 0;

static int cleanup(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++cleaned;  /* where it runs: the library's resources are released here */
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, cleanup, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, key, &cleaned); /* relies on MPI_Finalize to delete it */
  MPI_Comm_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
