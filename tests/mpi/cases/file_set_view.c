// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI-IO with a file view: a correct program must stay clean. MPICH 4.0's ROMIO caches its own
 * state on datatypes under a keyval it creates through PMPI_Type_create_keyval (so attrcheck never
 * sees it made) and frees that keyval with MPI_Type_free_keyval, through the MPI_ entry point,
 * while MPI_Finalize runs its MPI_COMM_SELF delete callbacks. Neither is the program's error: a
 * keyval attrcheck never saw made is forwarded and learned, and MPI_Finalize's own teardown is not
 * a call after finalize. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[256];
  if (rank == 0) snprintf(path, sizeof path, "/tmp/attrcheck-file-set-view-%ld.dat", (long)getpid());
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

  MPI_File fh;
  MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
  MPI_Datatype filetype;  // every size-th int is this rank's
  MPI_Type_vector(4, 1, size, MPI_INT, &filetype);
  MPI_Type_commit(&filetype);
  MPI_File_set_view(fh, (MPI_Offset)(rank * sizeof(int)), MPI_INT, filetype, "native", MPI_INFO_NULL);
  int out[4] = {rank, rank + 10, rank + 20, rank + 30}, in[4] = {0};
  MPI_File_write_at_all(fh, 0, out, 4, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_read_at_all(fh, 0, in, 4, MPI_INT, MPI_STATUS_IGNORE);
  MPI_File_close(&fh);
  MPI_Type_free(&filetype);

  int ok = in[0] == rank && in[3] == rank + 30, all = 0;
  MPI_Reduce(&ok, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("file_set_view: %s\n", all == size ? "read back what was written" : "MISMATCH");
  MPI_Finalize();
  return all == size || rank != 0 ? 0 : 1;
}
