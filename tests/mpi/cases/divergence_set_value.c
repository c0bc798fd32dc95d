// attrcheck-test: np=2 modes=shadow
// expect: impl.divergence
// clean
/* impl.divergence on set: a set made behind attrcheck's back through PMPI_ leaves the library holding a value the
 * calls attrcheck saw do not imply: the next replacing set makes the library pass that value to
 * the delete callback, which the runtime must catch even on its quick path for repeated sets
 * (deferred sets): the value is compared at once. */
#include <mpi.h>
#include <stdio.h>

static long deleted;

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  deleted += (long)value;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &key, NULL);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_attr(c, key, (void*)1);
  MPI_Comm_set_attr(c, key, (void*)2); /* a repeated set: the quick path */
  PMPI_Comm_set_attr(c, key, (void*)3); /* unseen: the library now holds 3, the model 2 */
  MPI_Comm_set_attr(c, key, (void*)4);
  MPI_Comm_set_attr(c, key, (void*)5);
  MPI_Comm_free(&c);
  MPI_Comm_free_keyval(&key);
  if (rank == 0) printf("delete callbacks saw %ld in all\n", deleted);
  MPI_Finalize();
  return 0;
}
