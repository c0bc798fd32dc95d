/* C half of self_delete_order_mixed.f90: a C attribute on MPI_COMM_SELF whose C delete callback
 * prints when it runs (rank 0). */
#include <mpi.h>
#include <stdio.h>

static int c_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  int rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    printf("self_delete_order_mixed: delete %ld (C)\n", (long)value);
    fflush(stdout);
  }
  return MPI_SUCCESS;
}

void c_set_on_self_(MPI_Fint* value) {
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, c_delete, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, (void*)(long)*value);
  MPI_Comm_free_keyval(&key);
}
