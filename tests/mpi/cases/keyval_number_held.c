// attrcheck-test: np=1 modes=shadow,emulate
// clean
// exit: 0
/* A freed keyval's number is not handed out again before 4,096 later keyval frees in shadow mode
 * (the quarantine, src/runtime/process/keyvals.cpp; held keys are released in batches of 512, highest
 * number first), however long the program has been churning keyvals; natively Open MPI hands it
 * to the very next key created. Keys are freed and created one at a time, past several batch
 * releases; every new key's number is checked against the numbers of the last HOLD frees.
 * In emulate mode keyvals are attrcheck's own ids (generation + slot), never reissued alike.
 * Exits 1 if a number came back too early or a call failed. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { HOLD = 4096, BATCH = 512, ROUNDS = 4 * (HOLD + BATCH) };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  /* recent[f % HOLD]: the number the f-th free gave up */
  static int recent[HOLD];
  int failures = 0, early = 0;
  long frees = 0;
  int live[3];
  for (int j = 0; j < 3; ++j)  /* a few live keys, so the numbers freed are not always the last made */
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &live[j], NULL) != MPI_SUCCESS)
      ++failures;
  for (long i = 0; i < ROUNDS; ++i) {
    int k;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL) != MPI_SUCCESS) {
      ++failures;
      continue;
    }
    const long window = frees < HOLD ? frees : HOLD;
    for (long f = 0; f < window; ++f)
      if (recent[f] == k) ++early;
    /* rotate: free the oldest live key, keep the new one */
    const int j = (int)(i % 3);
    int gone = live[j];
    live[j] = k;
    recent[frees % HOLD] = gone;
    if (MPI_Comm_free_keyval(&gone) != MPI_SUCCESS) ++failures;
    ++frees;
  }
  printf("%ld frees: %d numbers back within %d frees, %d failed calls\n", frees, early, HOLD, failures);
  for (int j = 0; j < 3; ++j) MPI_Comm_free_keyval(&live[j]);
  MPI_Finalize();
  return early || failures ? 1 : 0;
}
