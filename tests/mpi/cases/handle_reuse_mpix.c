// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// native-skip: 1
// skip-on standard-abi: MPICH's MPIX_ extensions are not part of the standard ABI (its mpi.h declares none)
// skip-on openmpi: the program calls MPIX_Comm_shrink as MPICH's mpi.h declares it (Open MPI's, where it has one, is in its ULFM extension's mpi-ext.h)
/* A communicator made by the fault-tolerance extension's MPIX_Comm_shrink, whose handle is the
 * value of one the program just freed (MPICH hands a freed handle out again at once): a correct
 * program, whose free of the new communicator must succeed as it does natively. Where the library
 * aborts in MPIX_Comm_shrink natively (MPICH 4.0.2 and 4.2.1, ch4: an assertion, status 1), the
 * harness's native run skips the case, with the library's words. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, failed = 0, reused = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if defined(MPICH_VERSION)
  for (int i = 0; i < 3; ++i) {
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    const MPI_Comm freed = a;
    MPI_Comm_free(&a);
    if (MPIX_Comm_shrink(MPI_COMM_WORLD, &b) != MPI_SUCCESS) ++failed;
    reused += b == freed;
    int size = 0;
    if (MPI_Comm_size(b, &size) != MPI_SUCCESS || size != 2) ++failed;
    if (MPI_Comm_free(&b) != MPI_SUCCESS) ++failed;
  }
#endif
  if (rank == 0) printf("handle_reuse_mpix: %d failed, handle reused %s\n", failed, reused ? "yes" : "no");
  MPI_Finalize();
  return 0;
}
