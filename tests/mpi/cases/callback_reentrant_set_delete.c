// attrcheck-test: np=1 modes=shadow,emulate
// expect: callback.reentrant
// clean
// exit: 0
/* callback.reentrant from the delete callback of a set and of a delete, not of a free: the
 * callback sets another attribute on the communicator it runs for, (1) while a set replaces the
 * value (the old value's callback), (2) while the delete of a value set just before runs it.
 * In emulate mode both calls take the query cache's way (the callback is run by the cache, not
 * the engine: a deferred first set, then a replace and a delete of it), which must refuse the
 * nested set as the engine's way does. The program counts the refusals itself: under attrcheck
 * (ATTRCHECK_MODE set by the launcher, not "off") every nested set must be refused, or it exits
 * 1 (without the cache's callback frame only the engine's runs refuse: 1 of 6). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int key_a, key_b;
static int refused = 0, ran = 0;

static int meddling_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)value; (void)extra;
  ++ran;
  if (MPI_Comm_set_attr(comm, key_b, (void*)7) != MPI_SUCCESS) ++refused; /* BUG */
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key_b, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, meddling_delete, &key_a, NULL);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  /* Warm the query cache, then: a first set (deferred), a replace (runs the callback), a delete
   * (runs it again). */
  for (int round = 0; round < 3; ++round) {
    MPI_Comm_set_attr(comm, key_a, (void*)1);
    MPI_Comm_set_attr(comm, key_a, (void*)2);
    MPI_Comm_delete_attr(comm, key_a);
  }
  printf("callbacks ran %d times, nested sets refused %d times\n", ran, refused);
  const char* mode = getenv("ATTRCHECK_MODE");
  const int checked = mode && strcmp(mode, "off") != 0;
  const int bad = ran != 6 || (checked && refused != ran);
  if (bad) printf("callback_reentrant_set_delete: FAILED\n");
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key_a);
  MPI_Comm_free_keyval(&key_b);
  MPI_Finalize();
  return bad;
}
