// attrcheck-test: np=1 modes=shadow,emulate
// expect: keyval.freed
// clean
// exit: 0
/* A stale copy of a freed keyval, used after another key was created: Open MPI hands the freed
 * number to the new key at once, so natively the stale copy silently names the new key. Both
 * modes must report keyval.freed (and refuse the set, so the new key's attribute is untouched). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int first;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &first, NULL);
  const int stale = first;
  MPI_Comm_free_keyval(&first);
  int second;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &second, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, second, (void*)2);
  MPI_Comm_set_attr(MPI_COMM_WORLD, stale, (void*)1); /* BUG: stale keyval */
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, second, &v, &flag);
  printf("second key holds %ld\n", (long)(size_t)v);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, second);
  MPI_Comm_free_keyval(&second);
  MPI_Finalize();
  return 0;
}
