// attrcheck-test: np=2 modes=shadow,emulate
// clean
// divergence: self-delete-order-ignores-reset
// expect-portable-on mpich/shadow: portability.self-delete-order-ignores-reset openmpi-4.1 openmpi-5.0 openmpi-6.0
// exit: 0
// native: same-stdout
/* Sets made in a row, as a library caching state on a communicator makes them: in shadow mode
 * the runtime checks each at once but lets the engine catch up later (deferred sets). Whatever
 * comes next must see every one of them as if each had been applied on the spot: gets, a dup's
 * copy callbacks, a delete, a free, a delete callback that itself calls MPI in the middle of a
 * set, and MPI_Finalize deleting MPI_COMM_SELF's attributes newest first (in shadow mode the
 * library's order is compared with the engine's, so a deferred set applied out of order would be
 * reported). The output must be the native run's. */
#include <mpi.h>
#include <stdio.h>

static int rank;
static int k_a, k_b, k_nested, k_x, k_y;
static MPI_Comm other;

static void say(const char* what, long value) {
  if (rank == 0) printf("deferred_sets: %s %ld\n", what, value);
  fflush(stdout);
}

static int copy_seen(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)extra;
  say(keyval == k_a ? "copy callback of a saw" : "copy callback of b saw", (long)in);
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int delete_seen(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)extra;
  say(keyval == k_a ? "delete callback of a saw" : "delete callback of b saw", (long)value);
  return MPI_SUCCESS;
}

/* Calls MPI from inside the set that replaces its value. */
static int delete_nested(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(other, k_a, &v, &flag);
  say("nested delete callback saw", (long)value);
  say("  and read a on the other communicator", flag ? (long)v : -1);
  return MPI_SUCCESS;
}

static int self_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  if (rank == 0) printf("deferred_sets: MPI_COMM_SELF's delete callback saw %s\n", (const char*)value);
  fflush(stdout);
  return MPI_SUCCESS;
}

static long get(MPI_Comm c, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(c, key, &v, &flag);
  return flag ? (long)v : -1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_create_keyval(copy_seen, delete_seen, &k_a, NULL);
  MPI_Comm_create_keyval(copy_seen, delete_seen, &k_b, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_nested, &k_nested, NULL);

  MPI_Comm c, copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  MPI_Comm_set_attr(other, k_a, (void*)500);

  /* Runs of sets, reads in between. */
  for (long i = 1; i <= 5; ++i) {
    MPI_Comm_set_attr(c, k_a, (void*)(10 * i));
    MPI_Comm_set_attr(c, k_b, (void*)(10 * i + 1));
    if (i % 2) MPI_Comm_set_attr(c, k_a, (void*)(10 * i + 2));
  }
  say("a reads", get(c, k_a));
  say("b reads", get(c, k_b));
  MPI_Comm_set_attr(c, k_b, (void*)77);

  /* A dup copies what the last sets left. */
  MPI_Comm_dup(c, &copy);
  say("the copy's a reads", get(copy, k_a));
  say("the copy's b reads", get(copy, k_b));

  /* More sets, then a delete and frees, which run the delete callbacks on the latest values. */
  MPI_Comm_set_attr(c, k_a, (void*)88);
  MPI_Comm_set_attr(copy, k_b, (void*)99);
  MPI_Comm_delete_attr(c, k_a);
  say("a after its delete reads", get(c, k_a));
  MPI_Comm_set_attr(c, k_b, (void*)111);
  MPI_Comm_free(&copy);
  MPI_Comm_free(&c);

  /* A delete callback calling MPI in the middle of a set. */
  MPI_Comm_set_attr(other, k_nested, (void*)1);
  for (long i = 2; i <= 3; ++i) {
    MPI_Comm_set_attr(other, k_a, (void*)(500 + i));
    MPI_Comm_set_attr(other, k_nested, (void*)i);
  }
  say("nested reads", get(other, k_nested));
  MPI_Comm_free(&other);

  /* MPI_COMM_SELF: x, y, then both again and x once more: x was set last, so MPI_Finalize
     deletes it first. */
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &k_x, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &k_y, NULL);
  MPI_Comm_set_attr(MPI_COMM_SELF, k_x, (void*)"x1");
  MPI_Comm_set_attr(MPI_COMM_SELF, k_y, (void*)"y1");
  MPI_Comm_set_attr(MPI_COMM_SELF, k_x, (void*)"x2");
  MPI_Comm_set_attr(MPI_COMM_SELF, k_y, (void*)"y2");
  MPI_Comm_set_attr(MPI_COMM_SELF, k_x, (void*)"x3");
  MPI_Comm_free_keyval(&k_x);
  MPI_Comm_free_keyval(&k_y);
  MPI_Comm_free_keyval(&k_a);
  MPI_Comm_free_keyval(&k_b);
  MPI_Comm_free_keyval(&k_nested);
  if (rank == 0) printf("deferred_sets: calling MPI_Finalize\n");
  fflush(stdout);
  MPI_Finalize();
  return 0;
}
