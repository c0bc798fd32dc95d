// attrcheck-test: np=2 modes=shadow
// expect: impl.divergence
// clean
/* impl.divergence on get: code that changes attributes through PMPI_ directly (a library built
 * against the profiling interface, say) makes the library's answer differ from what the calls
 * attrcheck saw imply. The gets before the change are answered from the runtime's query cache;
 * the cross-check with the library must still catch a different value and a missing attribute. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_attr(c, key, (void*)1);
  void* v = NULL;
  int flag = 0;
  for (int i = 0; i < 3; ++i) MPI_Comm_get_attr(c, key, &v, &flag);  /* the cache holds it */
  printf("rank %d before: %ld\n", rank, (long)v);

  PMPI_Comm_set_attr(c, key, (void*)2);  /* unseen: a different value */
  MPI_Comm_get_attr(c, key, &v, &flag);
  printf("rank %d after an unseen set: %ld\n", rank, (long)v);

  MPI_Comm_set_attr(c, key, (void*)3);
  MPI_Comm_get_attr(c, key, &v, &flag);
  PMPI_Comm_delete_attr(c, key);  /* unseen: the attribute is gone */
  MPI_Comm_get_attr(c, key, &v, &flag);
  printf("rank %d after an unseen delete: flag %d\n", rank, flag);

  MPI_Comm_free(&c);
  MPI_Comm_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
