// attrcheck-test: np=2 modes=shadow,emulate
// divergence: win-allocate-base-attribute-differs
// expect-portable-on mpich-4.0/shadow: portability.win-allocate-base-attribute-differs openmpi-4.1 openmpi-5.0 openmpi-6.0 mpich-4.2 mpich-5.0
// clean
// exit: 0
/* MPI_WIN_BASE is the window's base address (MPI-4.0 12.2.6), for MPI_Win_allocate the baseptr
 * it returned. MPICH 4.0.2 (ch4:ucx) answers another on rank 1 of 2 for an 8-byte window (8 bytes
 * below it); 64 and 256 bytes are fine. A correct program that only reads the attribute: shadow
 * mode, which gives the program the library's answer, notes the library's (library.divergence),
 * never at the program's call; emulate mode answers the base the call returned, as the standard
 * says (checked below, on every rank and size). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = getenv("ATTRCHECK_MODE");
  const int emulate = mode && !strcmp(mode, "emulate");
  static const MPI_Aint sizes[] = {8, 64, 256};
  int differs = 0;
  for (int i = 0; i < 3; ++i) {
    void* base = NULL;
    MPI_Win win;
    MPI_Win_allocate(sizes[i], 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    void* attr = NULL;
    int flag = 0;
    MPI_Win_get_attr(win, MPI_WIN_BASE, &attr, &flag);
    if (!flag || attr != base) ++differs;
    MPI_Win_free(&win);
  }
  int total = 0;
  MPI_Reduce(&differs, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("win_allocate_base: MPI_WIN_BASE differs from the allocated base %d times\n", total);
  MPI_Finalize();
  if (emulate && differs) {
    fprintf(stderr, "win_allocate_base: rank %d: emulate mode answered another MPI_WIN_BASE %d times\n", rank, differs);
    return 1;
  }
  return 0;
}
