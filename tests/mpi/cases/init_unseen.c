// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.leak
// clean
// exit: 0
// native: same-stdout
/* MPI started through a path attrcheck does not see (here PMPI_Init_thread; in real programs a
 * `use mpi_f08` main calling C helpers): the library says MPI runs, so the tool must adopt that
 * instead of calling every attribute call lifecycle.before-init and refusing it. The attribute
 * calls work as natively, and the tool checks them from then on (the leaked keyval is found). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int provided = 0;
  PMPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int failures = 0, key, leaked;
  if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void*)42) != MPI_SUCCESS) ++failures;
  void* v = NULL;
  int flag = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, key, &v, &flag) != MPI_SUCCESS || !flag || v != (void*)42) ++failures;
  if (MPI_Comm_delete_attr(MPI_COMM_WORLD, key) != MPI_SUCCESS) ++failures;
  if (MPI_Comm_free_keyval(&key) != MPI_SUCCESS) ++failures;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &leaked, NULL); /* BUG: leaked */
  int total = 0;
  MPI_Reduce(&failures, &total, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("%d failures\n", total);
  MPI_Finalize();
  return 0;
}
