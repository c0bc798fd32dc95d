// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* The pattern Open MPI's maintainers recommend since Open MPI 5 stopped running MPI_COMM_WORLD's
 * delete callbacks at MPI_Finalize (UCC does this): a library caches a value on MPI_COMM_WORLD with
 * a delete callback, and its delete callback on MPI_COMM_SELF, which MPI_Finalize runs first,
 * deletes that MPI_COMM_WORLD attribute itself and frees the keys. Nothing relies on MPI_Finalize
 * deleting MPI_COMM_WORLD's attributes: attr.world-at-finalize is decided on what is still set
 * once MPI_COMM_SELF's delete callbacks have run, and here that is nothing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int world_key = MPI_KEYVAL_INVALID, self_key = MPI_KEYVAL_INVALID;
static int rank;

static int world_cleanup(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  free(value);
  if (rank == 0) printf("attr_world_cleaned_by_self: world attribute deleted\n");
  return MPI_SUCCESS;
}

static int library_shutdown(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  MPI_Comm_delete_attr(MPI_COMM_WORLD, world_key);
  MPI_Comm_free_keyval(&world_key);
  MPI_Comm_free_keyval(&self_key);
  if (rank == 0) printf("attr_world_cleaned_by_self: library shut down\n");
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, world_cleanup, &world_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, world_key, malloc(64));
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, library_shutdown, &self_key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, self_key, NULL);
  if (rank == 0) printf("attr_world_cleaned_by_self: done\n");
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
