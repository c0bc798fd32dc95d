// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.error
// divergence: comm-free-drops-attributes-on-failed-delete
// expect-portable-on openmpi: portability.comm-free-drops-attributes-on-failed-delete mpich-4.0 mpich-4.2 mpich-5.0
// expect-portable-on mpich/emulate: portability.comm-free-drops-attributes-on-failed-delete mpich-4.0 mpich-4.2 mpich-5.0
// expect-portable-on mpich/shadow: portability.comm-free-drops-attributes-on-failed-delete openmpi-4.1 openmpi-5.0 openmpi-6.0
// expect-where: callback.error failing_delete
// rank-symbolized: callback.error failing_delete callback_error.c
// clean
// exit: 0
/* callback.error: a delete callback returns MPI_ERR_OTHER during MPI_Comm_free, so the free must
 * fail and the communicator stays usable. The callback fails only once: the second free works.
 * What the free does then is the library's (MPICH drops the attribute: the portability finding
 * names the series that do otherwise). */
#include <mpi.h>
#include <stdio.h>

static int calls = 0;

/* The finding's site is this callback's entry address: it must name failing_delete, not whatever
 * function precedes it in the binary (a return address minus one would). */
static int failing_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  return ++calls == 1 ? MPI_ERR_OTHER : MPI_SUCCESS; /* BUG the first time */
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, failing_delete, &key, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_attr(comm, key, (void*)1);

  const int rc1 = MPI_Comm_free(&comm);
  const int first_failed = rc1 != MPI_SUCCESS;
  const int still_live = comm != MPI_COMM_NULL;
  void* got = NULL;
  int flag = 0;
  if (still_live) MPI_Comm_get_attr(comm, key, &got, &flag);
  const int rc2 = still_live ? MPI_Comm_free(&comm) : MPI_ERR_OTHER;
  MPI_Comm_free_keyval(&key);

  if (rank == 0) {
    printf("callback_error: first free failed %d, communicator still live %d, attribute kept %d\n", first_failed,
           still_live, flag && got == (void*)1);
    printf("callback_error: second free ok %d, delete callback calls %d\n", rc2 == MPI_SUCCESS, calls);
  }
  MPI_Finalize();
  return 0;
}
