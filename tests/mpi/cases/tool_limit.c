// attrcheck-test: np=2 modes=shadow
// env: ATTRCHECK_MAX_KEYVALS=40 ATTRCHECK_MAX_OBJECTS=12
// expect: tool.limit
// clean
// exit: 0
// native: same-stdout
/* No capacity of the tool may change what a program does. With attrcheck's capacities lowered to
 * 40 keyvals and 12 objects (testing knobs), a program that holds 100 keyvals and 30 communicators
 * with attributes must compute what it computes natively: past the limits, calls go to the MPI
 * library unchecked, and tool.limit (info) says so once per capacity. Shadow mode only: in emulate
 * mode the library cannot serve attributes of attrcheck's keyvals on objects past the object
 * limit (tool_limit_keyvals.c covers the keyval limit in both modes). */
#include <mpi.h>
#include <stdio.h>

enum { KEYS = 100, COMMS = 30 };

static int deletes = 0;
static int delete_cb(MPI_Comm c, int k, void* v, void* e) {
  (void)c; (void)k; (void)v; (void)e;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int failures = 0;
  int keys[KEYS];
  for (int i = 0; i < KEYS; ++i)
    if (MPI_Comm_create_keyval(MPI_COMM_DUP_FN, delete_cb, &keys[i], NULL) != MPI_SUCCESS) ++failures;
  MPI_Comm comms[COMMS];
  for (int c = 0; c < COMMS; ++c) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]) != MPI_SUCCESS) ++failures;
    for (int i = c; i < KEYS; i += COMMS)
      if (MPI_Comm_set_attr(comms[c], keys[i], (void*)(size_t)(i + 1)) != MPI_SUCCESS) ++failures;
  }
  long sum = 0;
  for (int c = 0; c < COMMS; ++c)
    for (int i = 0; i < KEYS; ++i) {
      void* v = NULL;
      int flag = 0;
      if (MPI_Comm_get_attr(comms[c], keys[i], &v, &flag) != MPI_SUCCESS) ++failures;
      if (flag) sum += (long)(size_t)v;
    }
  MPI_Comm copy;
  if (MPI_Comm_dup(comms[COMMS - 1], &copy) != MPI_SUCCESS) ++failures; /* copies through MPI_COMM_DUP_FN */
  if (MPI_Comm_delete_attr(comms[0], keys[0]) != MPI_SUCCESS) ++failures;
  MPI_Comm_free(&copy);
  for (int c = 0; c < COMMS; ++c)
    if (MPI_Comm_free(&comms[c]) != MPI_SUCCESS) ++failures;
  for (int i = 0; i < KEYS; ++i)
    if (MPI_Comm_free_keyval(&keys[i]) != MPI_SUCCESS) ++failures;
  int totals[2], mine[2] = {failures, deletes};
  MPI_Reduce(mine, totals, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("%d failures, sum %ld, %d delete callbacks\n", totals[0], sum, totals[1]);
  MPI_Finalize();
  return 0;
}
