// attrcheck-test: np=1 modes=shadow,emulate
// expect: keyval.freed
// clean
// exit: 0
/* The counterpart of keyval_freed_delete.c: once the last attribute that used a freed key is
 * gone, the key no longer exists, and a delete through a saved copy of it is keyval.freed. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm a;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  const int saved = key;
  MPI_Comm_set_attr(a, key, (void*)1);
  MPI_Comm_free_keyval(&key);
  MPI_Comm_delete_attr(a, saved);             /* legal: frees the last attribute, and the key */
  const int rc = MPI_Comm_delete_attr(a, saved); /* BUG: the key is gone */
  printf("second delete %s\n", rc == MPI_SUCCESS ? "succeeded" : "failed");
  MPI_Comm_free(&a);
  MPI_Finalize();
  return 0;
}
