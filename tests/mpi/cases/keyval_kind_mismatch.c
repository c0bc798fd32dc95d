// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.kind-mismatch
// clean
// exit: 0
/* keyval.kind-mismatch: a datatype keyval read on a communicator (Open MPI accepts it silently:
 * success, flag 0) and a communicator keyval set on a datatype. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int type_key, comm_key;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &type_key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &comm_key, NULL);

  void* got = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, type_key, &got, &flag); /* BUG: the silent case */

  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  int value = 3;
  MPI_Type_set_attr(pair, comm_key, &value); /* BUG */
  MPI_Type_free(&pair);

  MPI_Type_free_keyval(&type_key);
  MPI_Comm_free_keyval(&comm_key);
  if (rank == 0) printf("keyval_kind_mismatch: done\n");
  MPI_Finalize();
  return 0;
}
