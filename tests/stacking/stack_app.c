/* The program the stacking tests run under attrcheck and another PMPI tool. It caches an attribute
 * with a delete callback on a duplicate of MPI_COMM_WORLD and frees the duplicate (the callback
 * runs), frees its keyval twice through a copy of the handle (keyval.double-free), leaves a second
 * keyval unfreed (keyval.leak) and exchanges one integer with each neighbour. Errors return
 * instead of aborting, so that the double free is reported and the program goes on; it exits 0.
 * Rank 0 prints how often its delete callback ran. With STACK_APP_PLAIN set it makes no keyval,
 * attribute or object call at all: a correct program attrcheck has nothing to say about. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int callback_runs;

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra_state) {
  (void)comm, (void)keyval, (void)value, (void)extra_state;
  ++callback_runs;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  /* A keyval error is raised on MPI_COMM_SELF (MPI 4) or MPI_COMM_WORLD (older libraries). */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  if (getenv("STACK_APP_PLAIN")) {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rank == 0) printf("callback ran %d\n", callback_runs);
    return 0;
  }

  int keyval;
  static int value = 42;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &keyval, NULL);
  const int copy = keyval; /* a copy of the handle: MPI_Comm_free_keyval resets only keyval */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_attr(dup, keyval, &value);
  MPI_Comm_free(&dup); /* runs count_delete */
  MPI_Comm_free_keyval(&keyval);
  int again = copy;
  MPI_Comm_free_keyval(&again); /* keyval.double-free: returns an error, ignored */

  int leaked;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &leaked, NULL); /* keyval.leak */

  int out = rank, in = -1;
  MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 0, &in, 1, MPI_INT, (rank + size - 1) % size, 0,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  if (rank == 0) printf("callback ran %d\n", callback_runs);
  return 0;
}
