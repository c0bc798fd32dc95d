// attrcheck-test: np=2 modes=shadow,emulate
// expect: arg.null
// clean
// exit: 0
/* arg.null: MPI_Comm_get_attr with a NULL flag pointer, and MPI_Comm_create_keyval with a NULL
 * copy function (the predefined MPI_COMM_NULL_COPY_FN was meant). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void*)1);
  void* got = NULL;
  int failures = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, key, &got, NULL) != MPI_SUCCESS) ++failures; /* BUG */
  MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
  MPI_Comm_free_keyval(&key);

  int bad = MPI_KEYVAL_INVALID;
  if (MPI_Comm_create_keyval(NULL, MPI_COMM_NULL_DELETE_FN, &bad, NULL) != MPI_SUCCESS) ++failures; /* BUG */
  if (bad != MPI_KEYVAL_INVALID) MPI_Comm_free_keyval(&bad);

  if (rank == 0) printf("arg_null: %d of 2 calls failed\n", failures);
  MPI_Finalize();
  return 0;
}
