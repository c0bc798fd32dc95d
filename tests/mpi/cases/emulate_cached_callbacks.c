// attrcheck-test: np=1 modes=emulate
// expect: callback.error
// clean
// exit: 0
/* Emulate mode defers the sets that run no callback and runs a delete callback from its query
 * cache (a set replacing a value, the delete of a deferred first set), without its engine. What
 * the standard says must still hold, and the program checks it itself (a wrong answer exits 1):
 *  - a delete callback that fails vetoes the delete: the call fails, the attribute stays, and a
 *    later delete runs the callback again and succeeds; likewise a failing callback of a set
 *    that replaces a value: the set fails and the old value stays;
 *  - a delete callback sees its attribute still set while it runs (a get from inside it);
 *  - a delete callback that frees its own keyval in the middle of a replacing set: the set still
 *    succeeds, and the new value's delete callback runs when the communicator is freed;
 *  - a delete callback that sets an attribute on another communicator (the engine moves while the
 *    cache's set is in flight);
 *  - sets and deletes on MPI_COMM_SELF left pending at MPI_Finalize, deleted newest first. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int k_fail, k_peek, k_frees, k_moves, k_other, k_self1, k_self2;
static int fail_next = 0, runs = 0, self_order = 0, self_wrong = 0, self2_id;
static long peeked = -1, last_value = -1;
static MPI_Comm c, other;

static void check(int ok, const char* what) {
  if (ok) return;
  printf("emulate_cached_callbacks: FAILED: %s\n", what);
  fflush(stdout);
  exit(1);
}

static long get(MPI_Comm comm, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(comm, key, &v, &flag);
  return flag ? (long)v : -1;
}

static int del_fail(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  ++runs;
  last_value = (long)value;
  if (fail_next) {
    fail_next = 0;
    return MPI_ERR_OTHER;
  }
  return MPI_SUCCESS;
}

static int del_peek(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)value; (void)extra;
  peeked = get(comm, keyval);
  return MPI_SUCCESS;
}

static int del_frees(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  last_value = (long)value;
  ++runs;
  if (k_frees != MPI_KEYVAL_INVALID && (long)value == 1) MPI_Comm_free_keyval(&k_frees);
  return MPI_SUCCESS;
}

static int del_moves(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  ++runs;
  MPI_Comm_set_attr(other, k_other, value);
  return MPI_SUCCESS;
}

static int del_self(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)value; (void)extra;
  /* Newest first: k_self2 was set last. */
  if (self_order == 0 && keyval != self2_id) self_wrong = 1;
  ++self_order;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_fail, &k_fail, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_peek, &k_peek, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_frees, &k_frees, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_moves, &k_moves, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k_other, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_self, &k_self1, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_self, &k_self2, NULL);
  self2_id = k_self2;  /* (the keyval is freed before MPI_Finalize) */

  /* Each pattern twice: the first time the query is checked in full, then the cache serves. */
  for (int round = 0; round < 3; ++round) {
    /* A failing delete callback vetoes the delete of a deferred first set. */
    runs = 0;
    check(MPI_Comm_set_attr(c, k_fail, (void*)11) == MPI_SUCCESS, "first set");
    fail_next = 1;
    check(MPI_Comm_delete_attr(c, k_fail) != MPI_SUCCESS, "a delete whose callback fails fails");
    check(runs == 1 && last_value == 11, "the failing callback got the value");
    check(get(c, k_fail) == 11, "the attribute stays after a failed delete");
    check(MPI_Comm_delete_attr(c, k_fail) == MPI_SUCCESS, "the second delete succeeds");
    check(runs == 2 && last_value == 11, "the second delete ran the callback");
    check(get(c, k_fail) == -1, "gone after the delete");

    /* A failing callback of a replacing set: the set fails, the old value stays. */
    runs = 0;
    check(MPI_Comm_set_attr(c, k_fail, (void*)21) == MPI_SUCCESS, "set");
    check(MPI_Comm_set_attr(c, k_fail, (void*)22) == MPI_SUCCESS, "replace");
    fail_next = 1;
    check(MPI_Comm_set_attr(c, k_fail, (void*)23) != MPI_SUCCESS, "a replace whose callback fails fails");
    check(runs == 2 && last_value == 22, "the failing callback got the value it replaces");
    check(get(c, k_fail) == 22, "the old value stays after a failed replace");
    check(MPI_Comm_delete_attr(c, k_fail) == MPI_SUCCESS && last_value == 22, "the delete after it");

    /* A delete callback sees its attribute while it runs. */
    peeked = -1;
    MPI_Comm_set_attr(c, k_peek, (void*)31);
    MPI_Comm_delete_attr(c, k_peek);
    check(peeked == 31, "a delete callback reads its own attribute");
    MPI_Comm_set_attr(c, k_peek, (void*)32);
    MPI_Comm_set_attr(c, k_peek, (void*)33);
    check(peeked == 32, "a replacing set's callback reads the old value");
    check(get(c, k_peek) == 33, "the replace's value");
    MPI_Comm_delete_attr(c, k_peek);
    check(peeked == 33 && get(c, k_peek) == -1, "deleted");

    /* A delete callback that moves the engine (a set on another communicator). */
    runs = 0;
    MPI_Comm_set_attr(c, k_moves, (void*)(long)(41 + round));
    MPI_Comm_set_attr(c, k_moves, (void*)(long)(51 + round));
    check(runs == 1 && get(other, k_other) == 41 + round, "the replace's callback set another attribute");
    check(get(c, k_moves) == 51 + round, "the replace under a moving callback");
    MPI_Comm_delete_attr(c, k_moves);
    check(runs == 2 && get(other, k_other) == 51 + round && get(c, k_moves) == -1, "the delete under a moving callback");
  }

  /* A replacing set whose callback frees the keyval: the set succeeds; the free runs the new
   * value's callback. (Warm the query first with other values.) */
  runs = 0;
  MPI_Comm_set_attr(c, k_frees, (void*)5);
  MPI_Comm_set_attr(c, k_frees, (void*)1);
  check(runs == 1 && last_value == 5, "replace");
  const int saved = k_frees;
  check(MPI_Comm_set_attr(c, saved, (void*)2) == MPI_SUCCESS, "a set whose callback frees the keyval succeeds");
  check(runs == 2 && last_value == 1 && k_frees == MPI_KEYVAL_INVALID, "the callback freed the keyval");
  MPI_Comm_free(&c);
  check(runs == 3 && last_value == 2, "the free ran the new value's callback");

  /* MPI_COMM_SELF's attributes at MPI_Finalize, set last (pending), newest first. */
  MPI_Comm_set_attr(MPI_COMM_SELF, k_self1, (void*)1);
  MPI_Comm_set_attr(MPI_COMM_SELF, k_self2, (void*)2);
  MPI_Comm_delete_attr(MPI_COMM_SELF, k_self1);
  MPI_Comm_set_attr(MPI_COMM_SELF, k_self1, (void*)3);
  MPI_Comm_set_attr(MPI_COMM_SELF, k_self2, (void*)4);
  MPI_Comm_free(&other);
  MPI_Comm_free_keyval(&k_fail);
  MPI_Comm_free_keyval(&k_peek);
  MPI_Comm_free_keyval(&k_moves);
  MPI_Comm_free_keyval(&k_other);
  MPI_Comm_free_keyval(&k_self1);
  MPI_Comm_free_keyval(&k_self2);
  check(self_order == 2, "the delete and the replace ran the callback");
  self_order = 0;
  self_wrong = 0;
  MPI_Finalize();
  check(!self_wrong, "MPI_COMM_SELF's attributes deleted newest first");
  check(self_order == 2, "MPI_Finalize ran both of MPI_COMM_SELF's delete callbacks");
  printf("emulate_cached_callbacks: ok\n");
  return 0;
}
