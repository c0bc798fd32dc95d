// attrcheck-test: np=2 modes=shadow,emulate
// expect: deprecated.call
// clean
// exit: 0
// native: same-stdout
/* Freeing a keyval that is in use "is not erroneous"; the remaining references "need to be
 * explicitly freed by the program, either via calls to MPI_COMM_DELETE_ATTR that free one
 * attribute instance, or by calls to MPI_COMM_FREE" (MPI_COMM_FREE_KEYVAL). So deleting through a
 * saved copy of the freed key is legal while attributes use it, and the delete callback runs
 * (MPICH's own test suite does this). Also through the deprecated MPI_Attr_delete. */
#include <mpi.h>
#include <stdio.h>

static int deletes = 0;
static int delete_cb(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)e;
  deletes += (int)(size_t)v;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int failures = 0;

  MPI_Comm a, b;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(b, MPI_ERRORS_RETURN);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_cb, &key, NULL);
  const int saved = key;
  MPI_Comm_set_attr(a, key, (void*)1);
  MPI_Comm_set_attr(b, key, (void*)10);
  MPI_Comm_free_keyval(&key);
  if (key != MPI_KEYVAL_INVALID) ++failures;

  if (MPI_Comm_delete_attr(a, saved) != MPI_SUCCESS) ++failures;  /* legal: the key is in use */
  if (MPI_Attr_delete(b, saved) != MPI_SUCCESS) ++failures;       /* the same, MPI-1 spelling */

  MPI_Comm_free(&a);
  MPI_Comm_free(&b);
  int counts[2] = {failures, deletes}, total[2];
  MPI_Reduce(counts, total, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("%d failures, delete callbacks saw %d\n", total[0], total[1]);
  MPI_Finalize();
  return 0;
}
