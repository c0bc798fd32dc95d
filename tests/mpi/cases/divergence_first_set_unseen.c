// attrcheck-test: np=2 modes=shadow
// expect: impl.divergence
// clean
// expect-message: impl.divergence ran a delete callback on
/* impl.divergence on a first set: a set made behind attrcheck's back through PMPI_ leaves the
 * library holding a value where the model holds none, so the next set, a first set for the
 * model, makes the library run the keyval's delete callback, which the standard does not call
 * there. The set takes the quick way of a first set of a keyval with a user delete function
 * (set_path.hpp: forward_first_set, with its answer "absent" current after the get), which goes
 * to the library without a call or replay scope of its own: the quiet replay must still collect
 * the run, and the set must be mirrored with it and the run reported. */
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
  void* v;
  int flag;
  /* Set + delete pairs (first sets, the later ones on the quick way), then a get that leaves the
     answer "absent" current in the query's cache entry. */
  for (long i = 1; i <= 3; ++i) {
    MPI_Comm_set_attr(c, key, (void*)i);
    MPI_Comm_delete_attr(c, key);
  }
  MPI_Comm_get_attr(c, key, &v, &flag);
  PMPI_Comm_set_attr(c, key, (void*)16); /* unseen: the library holds 16, the model nothing */
  MPI_Comm_set_attr(c, key, (void*)32); /* the library runs the delete callback with 16 */
  MPI_Comm_get_attr(c, key, &v, &flag);
  if (!flag || v != (void*)32) printf("unexpected value %p (flag %d)\n", v, flag);
  MPI_Comm_free(&c);
  MPI_Comm_free_keyval(&key);
  if (rank == 0) printf("delete callbacks saw %ld in all\n", deleted);
  MPI_Finalize();
  return 0;
}
