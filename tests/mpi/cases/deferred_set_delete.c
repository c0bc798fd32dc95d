// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
/* Set + delete pairs, as a library attaching state to a communicator for the length of one
 * operation makes them. In shadow mode the set is deferred and the delete that follows cancels
 * it without the engine ever seeing either. The model must still be the library's afterwards:
 * gets read "absent" after each delete and the value after each set; a delete callback that
 * calls MPI in the middle of the delete (the pending set is applied under it); other sets
 * deferred in between (the pending list reordered); a set replacing a value before the delete;
 * keyvals with a user delete callback and with MPI_COMM_NULL_DELETE_FN; a dup and MPI_Finalize
 * seeing what is left. The output must be the native run's, with no finding. */
#include <mpi.h>
#include <stdio.h>

static int rank;
static int k_user, k_null, k_nested, k_other, k_self;
static long deletes_seen;

static void say(const char* what, long value) {
  if (rank == 0) printf("deferred_set_delete: %s %ld\n", what, value);
  fflush(stdout);
}

static long get(MPI_Comm c, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(c, key, &v, &flag);
  return flag ? (long)v : -1;
}

static int delete_count(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  deletes_seen += (long)value;
  return MPI_SUCCESS;
}

/* Calls MPI from inside the delete callback. */
static int delete_nested(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)keyval; (void)extra;
  say("nested delete callback saw", (long)value);
  say("  and read other as", get(comm, k_other));
  return MPI_SUCCESS;
}

static int copy_keep(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int self_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  say("MPI_COMM_SELF's delete callback saw", (long)value);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_create_keyval(copy_keep, delete_count, &k_user, NULL);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k_null, NULL);
  MPI_Comm_create_keyval(copy_keep, delete_nested, &k_nested, NULL);
  MPI_Comm_create_keyval(copy_keep, delete_count, &k_other, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &k_self, NULL);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);

  /* Pairs on one keyval at a time, read back in between. */
  long reads = 0;
  for (long i = 1; i <= 20; ++i) {
    MPI_Comm_set_attr(MPI_COMM_SELF, k_user, (void*)i);
    reads += get(MPI_COMM_SELF, k_user);
    MPI_Comm_delete_attr(MPI_COMM_SELF, k_user);
    reads += get(MPI_COMM_SELF, k_user);
    MPI_Comm_set_attr(c, k_null, (void*)(100 + i));
    MPI_Comm_delete_attr(c, k_null);
  }
  say("sum of the reads", reads);
  say("sum the delete callbacks saw", deletes_seen);
  say("user reads after the pairs", get(MPI_COMM_SELF, k_user));
  say("null reads after the pairs", get(c, k_null));

  /* Another set deferred between the set and its delete, and one before. */
  deletes_seen = 0;
  for (long i = 1; i <= 10; ++i) {
    MPI_Comm_set_attr(c, k_other, (void*)(1000 + i));
    MPI_Comm_set_attr(c, k_user, (void*)i);
    MPI_Comm_set_attr(c, k_null, (void*)(200 + i));
    MPI_Comm_delete_attr(c, k_user);
    MPI_Comm_delete_attr(c, k_null);
  }
  say("other reads", get(c, k_other));
  say("user reads", get(c, k_user));
  say("sum the delete callbacks saw", deletes_seen);

  /* A set that replaces a value, then the delete: the replaced value's callback, then the new one's. */
  deletes_seen = 0;
  for (long i = 1; i <= 5; ++i) {
    MPI_Comm_set_attr(c, k_user, (void*)(10 * i));
    MPI_Comm_set_attr(c, k_user, (void*)(10 * i + 1));
    MPI_Comm_delete_attr(c, k_user);
  }
  say("sum the delete callbacks saw", deletes_seen);

  /* A delete callback calling MPI: the pending set is applied while the library deletes it. */
  for (long i = 1; i <= 3; ++i) {
    MPI_Comm_set_attr(c, k_nested, (void*)i);
    MPI_Comm_delete_attr(c, k_nested);
    say("nested reads after its delete", get(c, k_nested));
  }

  /* What is left is what a dup copies and a free deletes. */
  MPI_Comm_set_attr(c, k_user, (void*)7);
  MPI_Comm_delete_attr(c, k_user);
  MPI_Comm copy;
  MPI_Comm_dup(c, &copy);
  say("the copy's user reads", get(copy, k_user));
  say("the copy's other reads", get(copy, k_other));
  deletes_seen = 0;
  MPI_Comm_free(&copy);
  MPI_Comm_free(&c);
  say("the frees' delete callbacks saw", deletes_seen);

  /* MPI_COMM_SELF at MPI_Finalize: only the value that stayed is deleted. */
  MPI_Comm_set_attr(MPI_COMM_SELF, k_self, (void*)1);
  MPI_Comm_delete_attr(MPI_COMM_SELF, k_self);
  MPI_Comm_set_attr(MPI_COMM_SELF, k_self, (void*)2);
  MPI_Comm_delete_attr(MPI_COMM_SELF, k_self);
  MPI_Comm_set_attr(MPI_COMM_SELF, k_self, (void*)3);
  MPI_Comm_free_keyval(&k_user);
  MPI_Comm_free_keyval(&k_null);
  MPI_Comm_free_keyval(&k_nested);
  MPI_Comm_free_keyval(&k_other);
  MPI_Comm_free_keyval(&k_self);
  say("calling MPI_Finalize", 0);
  MPI_Finalize();
  return 0;
}
