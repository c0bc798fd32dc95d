// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* The HDF5 pattern: a library registers its shutdown as a delete callback on MPI_COMM_SELF and
 * frees the keyval right after the set. MPI_Finalize deletes MPI_COMM_SELF's attributes first,
 * so the callback runs at the start of MPI_Finalize, while MPI is still fully usable. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

struct library_state {
  int rank;
  int open_files;
};

static int closes = 0;

static int library_close(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)extra;
  struct library_state* st = value;
  ++closes;
  /* MPI still works here: read an attribute and do a collective on MPI_COMM_WORLD. */
  int size = 0;
  MPI_Comm_size(comm, &size);
  int* tag_ub = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  int total = 0;
  MPI_Allreduce(&st->open_files, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (st->rank == 0) {
    printf("hdf5_pattern: close callback ran at finalize (call %d), self size %d, tag_ub readable %d, "
           "open files closed %d\n", closes, size, flag && *tag_ub >= 32767, total);
    fflush(stdout);
  }
  free(st);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, library_close, &key, NULL);
  struct library_state* st = malloc(sizeof *st);
  st->rank = rank;
  st->open_files = 3;
  MPI_Comm_set_attr(MPI_COMM_SELF, key, st);
  MPI_Comm_free_keyval(&key); /* right after the set: the attribute keeps the key alive */

  int invalidated = key == MPI_KEYVAL_INVALID;
  if (rank == 0) printf("hdf5_pattern: keyval freed after set, handle invalidated %d\n", invalidated);
  if (rank == 0) printf("hdf5_pattern: calling MPI_Finalize, callbacks so far %d\n", closes);
  fflush(stdout);
  MPI_Finalize();
  if (rank == 0) printf("hdf5_pattern: after MPI_Finalize, callbacks %d\n", closes);
  return 0;
}
