// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.double-free
// clean
// exit: 0
/* keyval.double-free: a saved copy of a keyval freed a second time, once for a key with no
 * attribute and once for a key an attribute still uses (Open MPI over-releases there and would
 * then skip the attribute's delete callback; under the tool the second free is refused). */
#include <mpi.h>
#include <stdio.h>

static int deletes = 0;

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  /* 1: a key with no attribute. */
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  int saved = key;
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&saved); /* BUG */

  /* 2: a key still used by an attribute. */
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int key2;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &key2, NULL);
  MPI_Comm_set_attr(comm, key2, (void*)1);
  int saved2 = key2;
  MPI_Comm_free_keyval(&key2);
  MPI_Comm_free_keyval(&saved2); /* BUG */
  MPI_Comm_free(&comm);

  if (rank == 0) printf("keyval_double_free: %d delete callback(s) ran\n", deletes);
  MPI_Finalize();
  return 0;
}
