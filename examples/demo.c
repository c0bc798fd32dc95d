/* A small MPI program with a few seeded attribute bugs, for `attrcheck -- mpirun ... demo`.
 * Each bug is marked BUG; the rest is the correct use the checker must stay quiet about. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int deletes = 0;

static int cache_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  free(value);
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  /* Correct: a library caches a value on a duplicate communicator. */
  int cache_key;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, cache_delete, &cache_key, NULL);
  MPI_Comm lib_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &lib_comm);
  int* value = malloc(sizeof *value);
  *value = 42 + rank;
  MPI_Comm_set_attr(lib_comm, cache_key, value);
  int* got;
  int flag;
  MPI_Comm_get_attr(lib_comm, cache_key, &got, &flag);

  /* BUG: a datatype keyval used on a communicator (Open MPI accepts it silently). */
  int type_key;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &type_key, NULL);
  MPI_Comm_get_attr(MPI_COMM_WORLD, type_key, &got, &flag);
  MPI_Type_free_keyval(&type_key);

  /* BUG: the deprecated MPI-1 interface. */
  int old_key;
  MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &old_key, NULL);
  MPI_Attr_put(MPI_COMM_WORLD, old_key, (void*)7);

  /* BUG: a saved copy of a keyval freed twice (Open MPI then loses a delete callback). */
  int saved = cache_key;
  MPI_Comm_free_keyval(&cache_key);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_free_keyval(&saved);

  /* BUG: lib_comm is never freed, so cache_delete never runs for its value; old_key leaks. */
  MPI_Finalize();
  if (rank == 0) printf("demo: done (%d delete callbacks ran)\n", deletes);
  return 0;
}
