// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* 70,000 keyvals live at once is legal (Open MPI runs it; it is slow past that), and no capacity of the tool may change
 * what a program computes: every create, set, get and free succeeds and reads back its own value,
 * past 65,535 keys as before. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 70000 };  /* past 65,535; Open MPI takes O(N^2) to hand out this many */

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int* keys = malloc(sizeof(int) * N);
  int failures = 0;
  for (int i = 0; i < N; ++i)
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &keys[i], NULL) != MPI_SUCCESS)
      ++failures;
  for (int i = 0; i < N; i += 97)
    if (MPI_Comm_set_attr(MPI_COMM_SELF, keys[i], (void*)(size_t)(i + 1)) != MPI_SUCCESS) ++failures;
  long sum = 0;
  for (int i = 0; i < N; ++i) {
    void* v = NULL;
    int flag = 0;
    if (MPI_Comm_get_attr(MPI_COMM_SELF, keys[i], &v, &flag) != MPI_SUCCESS) ++failures;
    if (flag) sum += (long)(size_t)v;
  }
  for (int i = 0; i < N; i += 97) MPI_Comm_delete_attr(MPI_COMM_SELF, keys[i]);
  for (int i = 0; i < N; ++i)
    if (MPI_Comm_free_keyval(&keys[i]) != MPI_SUCCESS) ++failures;
  printf("%d keyvals: %d failures, sum %ld\n", N, failures, sum);
  free(keys);
  MPI_Finalize();
  return 0;
}
