// attrcheck-test: np=2 modes=shadow,emulate
// expect: attr.world-at-finalize
// expect-if world-attributes-deleted-at-finalize: callback.after-finalize
// clean
// exit: 0
/* callback.after-finalize: a delete callback on MPI_COMM_WORLD (not MPI_COMM_SELF) calls
 * MPI_Comm_get_attr when MPI_Finalize runs it, after MPI has begun tearing down. Where the library
 * never runs MPI_COMM_WORLD's delete callbacks at finalize (Open MPI 5), the callback does not run
 * in either mode, and only the attribute left on MPI_COMM_WORLD is reported. */
#include <mpi.h>
#include <stdio.h>

static int key;

static int late_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)value; (void)extra;
  void* got = NULL;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &got, &flag); /* BUG: MPI is being torn down */
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, late_delete, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void*)1); /* BUG: cleanup on MPI_COMM_WORLD */
  MPI_Comm_free_keyval(&key);

  if (rank == 0) printf("callback_after_finalize: done\n");
  MPI_Finalize();
  return 0;
}
