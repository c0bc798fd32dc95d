// attrcheck-test: np=1 modes=shadow,emulate
// expect: keyval.freed
// clean
// exit: 0
/* Keyval churn far past shadow mode's quarantine (src/runtime/process/keyvals.cpp: a freed key's number
 * is not given back to the library before 4,096 later frees, and held keys are released in batches
 * of 512), and a stale copy of a key freed 4,095 frees ago is still told apart: at several phases
 * of the batch cycle, a key is freed, 4,095 other keys are created and freed, a new key is created
 * (natively it would get the stale key's number once the library had it back) and a set through
 * the stale copy must be refused (keyval.freed) and leave the new key's attribute alone.
 * Exits 1 if a stale use was accepted or a legal call failed. */
#include <mpi.h>
#include <stdio.h>

enum { HOLD = 4096, BATCH = 512 };

static int failures = 0;

static void churn(int n) {
  for (int i = 0; i < n; ++i) {
    int k;
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL) != MPI_SUCCESS ||
        MPI_Comm_free_keyval(&k) != MPI_SUCCESS)
      ++failures;
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  churn(3 * (HOLD + BATCH));  /* the quarantine is full and has released several batches */
  const int phases[] = {0, 1, 255, BATCH - 1, BATCH};
  int accepted = 0;
  for (int p = 0; p < 5; ++p) {
    churn(phases[p]);
    int key;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
    const int stale = key;
    MPI_Comm_free_keyval(&key);
    churn(HOLD - 1);  /* the stale key's number has had HOLD - 1 later frees */
    int fresh;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &fresh, NULL);
    if (MPI_Comm_set_attr(MPI_COMM_SELF, fresh, (void*)2) != MPI_SUCCESS) ++failures;
    if (MPI_Comm_set_attr(MPI_COMM_SELF, stale, (void*)1) == MPI_SUCCESS) ++accepted; /* BUG: stale keyval */
    void* v = NULL;
    int flag = 0;
    if (MPI_Comm_get_attr(MPI_COMM_SELF, fresh, &v, &flag) != MPI_SUCCESS || !flag || v != (void*)2) ++failures;
    if (MPI_Comm_delete_attr(MPI_COMM_SELF, fresh) != MPI_SUCCESS) ++failures;
    if (MPI_Comm_free_keyval(&fresh) != MPI_SUCCESS) ++failures;
  }
  printf("stale uses accepted: %d of 5; failed legal calls: %d\n", accepted, failures);
  MPI_Finalize();
  return accepted || failures ? 1 : 0;
}
