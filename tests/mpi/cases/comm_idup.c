// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* MPI_Comm_idup copies attributes like MPI_Comm_dup: MPI_COMM_DUP_FN copies the value, a user
 * copy callback may change it or decline (flag 0), MPI_COMM_NULL_COPY_FN copies nothing. The new
 * communicator is checked after MPI_Wait, then freed (its delete callbacks run). */
#include <mpi.h>
#include <stdio.h>

static int copies = 0, deletes = 0;

static int plus_ten(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = (void*)((size_t)in + 10);
  *flag = 1;
  return MPI_SUCCESS;
}

static int decline(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra; (void)in; (void)out;
  ++copies;
  *flag = 0;
  return MPI_SUCCESS;
}

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

static int value_of(MPI_Comm c, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(c, key, &v, &flag);
  return flag ? (int)(size_t)v : -1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int dup_key, user_key, decline_key, null_key;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &dup_key, NULL);
  MPI_Comm_create_keyval(plus_ten, count_delete, &user_key, NULL);
  MPI_Comm_create_keyval(decline, count_delete, &decline_key, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &null_key, NULL);

  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_attr(comm, dup_key, (void*)1);
  MPI_Comm_set_attr(comm, user_key, (void*)2);
  MPI_Comm_set_attr(comm, decline_key, (void*)3);
  MPI_Comm_set_attr(comm, null_key, (void*)4);

  MPI_Comm copy;
  MPI_Request req;
  MPI_Comm_idup(comm, &copy, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  const int copies_after_wait = copies;

  int sum = 0, one = 1;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, copy);
  if (rank == 0)
    printf("comm_idup: after wait: dup_fn %d, user %d, declined %d, null %d; copy callbacks %d; allreduce %d\n",
           value_of(copy, dup_key), value_of(copy, user_key), value_of(copy, decline_key), value_of(copy, null_key),
           copies_after_wait, sum);

  /* The copy is independent: changing it leaves the original alone. */
  MPI_Comm_set_attr(copy, dup_key, (void*)100); /* replaces: a delete callback runs */
  const int original = value_of(comm, dup_key);

  MPI_Comm_free(&copy);
  const int deletes_copy = deletes;
  MPI_Comm_free(&comm);
  if (rank == 0)
    printf("comm_idup: original keeps %d; delete callbacks: replace + free of the copy %d, free of the original %d\n",
           original, deletes_copy, deletes - deletes_copy);

  MPI_Comm_free_keyval(&dup_key);
  MPI_Comm_free_keyval(&user_key);
  MPI_Comm_free_keyval(&decline_key);
  MPI_Comm_free_keyval(&null_key);
  MPI_Finalize();
  return 0;
}
