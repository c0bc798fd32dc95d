// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.error
// clean
// exit: 0
// expect-message: callback.error returned 5 during MPI_Comm_set_attr
// expect-message: callback.error returned 5 during MPI_Comm_delete_attr
/* callback.error from the delete callback of a replacing set and of a delete, each on the quick
 * way of a query already checked (set_path.hpp: in shadow mode the replacing set and the delete
 * that cancels a deferred first set, whose run the trampoline checks against the one expected):
 * the finding must name the call it ran in, which the quick ways' call scope gives the
 * trampoline. The callback fails once each time, returning 5 (the message names the code). */
#include <mpi.h>
#include <stdio.h>

static int fail_next = 0;

static int picky_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  if (fail_next) {
    fail_next = 0;
    return 5;
  }
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int key, single;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, picky_delete, &key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, picky_delete, &single, NULL);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  int failed = 0;
  /* Replacing sets: the later ones take the quick way. */
  for (long i = 1; i <= 3; ++i) MPI_Comm_set_attr(c, key, (void*)i);
  fail_next = 1;
  if (MPI_Comm_set_attr(c, key, (void*)4) != MPI_SUCCESS) ++failed; /* the delete of 3 fails */
  fail_next = 0;
  MPI_Comm_set_attr(c, key, (void*)5);
  /* Set + delete pairs: the later ones a deferred first set and the delete that cancels it. */
  for (long i = 1; i <= 3; ++i) {
    MPI_Comm_set_attr(c, single, (void*)i);
    MPI_Comm_delete_attr(c, single);
  }
  MPI_Comm_set_attr(c, single, (void*)6);
  fail_next = 1;
  if (MPI_Comm_delete_attr(c, single) != MPI_SUCCESS) ++failed; /* the delete of 6 fails */
  fail_next = 0;
  MPI_Comm_delete_attr(c, single);
  MPI_Comm_free(&c);
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&single);
  if (rank == 0) printf("failed calls: %d\n", failed);
  MPI_Finalize();
  return 0;
}
