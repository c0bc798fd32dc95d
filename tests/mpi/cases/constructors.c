// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// divergence: dist-graph-create-adjacent-copies-attributes
/* Only MPI_Comm_dup / MPI_Comm_idup copy attributes. Communicators made by MPI_Comm_split,
 * MPI_Comm_split_type, MPI_Comm_create, MPI_Cart_create, MPI_Cart_sub, MPI_Graph_create,
 * MPI_Dist_graph_create_adjacent, MPI_Intercomm_create and MPI_Intercomm_merge start with no
 * attributes (flag 0), no copy callback runs, and freeing them runs no delete callback of the
 * parent's attributes. (MPI_Comm_create_group and MPI_Intercomm_create are in
 * constructors_create_group.c and constructors_intercomm_create.c: Open MPI runs copy callbacks
 * there; Open MPI 5 copies them in MPI_Dist_graph_create_adjacent: a divergence its profile lists,
 * so shadow mode notes it and emulate mode answers as the standard says.) Needs an even number of
 * processes. */
#include <mpi.h>
#include <stdio.h>

static int copies = 0, deletes = 0;
static int k_user, k_dup;
static int rank, size;
static int all_clean = 1;

static int counting_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

/* Checks that `c` carries neither attribute, then frees it. */
static void check_and_free(const char* what, MPI_Comm* c) {
  void* v = NULL;
  int f_user = 1, f_dup = 1;
  MPI_Comm_get_attr(*c, k_user, &v, &f_user);
  MPI_Comm_get_attr(*c, k_dup, &v, &f_dup);
  const int before = deletes;
  MPI_Comm_free(c);
  const int ok = !f_user && !f_dup && copies == 0 && deletes == before;
  all_clean &= ok;
  if (rank == 0)
    printf("constructors: %-31s user attr %d, dup_fn attr %d, copy callbacks %d, delete callbacks on free %d\n", what,
           f_user, f_dup, copies, deletes - before);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Comm_create_keyval(counting_copy, counting_delete, &k_user, NULL);
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, counting_delete, &k_dup, NULL);
  MPI_Comm base;
  MPI_Comm_dup(MPI_COMM_WORLD, &base);
  MPI_Comm_set_attr(base, k_user, (void*)1);
  MPI_Comm_set_attr(base, k_dup, (void*)2);

  MPI_Comm c;
  MPI_Comm_split(base, rank % 2, size - rank, &c);
  check_and_free("MPI_Comm_split:", &c);

  MPI_Comm_split_type(base, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &c);
  check_and_free("MPI_Comm_split_type:", &c);

  MPI_Group group;
  MPI_Comm_group(base, &group);
  MPI_Comm_create(base, group, &c);
  check_and_free("MPI_Comm_create:", &c);
  MPI_Group_free(&group);

  int dims[1] = {size}, periods[1] = {1}, remain[1] = {1};
  MPI_Comm cart, sub;
  MPI_Cart_create(base, 1, dims, periods, 0, &cart);
  MPI_Comm_set_attr(cart, k_user, (void*)3); /* cart's own attribute: not copied by MPI_Cart_sub */
  MPI_Cart_sub(cart, remain, &sub);
  check_and_free("MPI_Cart_sub:", &sub);
  MPI_Comm_delete_attr(cart, k_user);
  deletes = 0;
  check_and_free("MPI_Cart_create:", &cart);

  /* A ring: each process has its two neighbours. */
  int index[64], edges[128];
  const int n = size <= 64 ? size : 64;
  for (int i = 0; i < n; ++i) {
    index[i] = 2 * (i + 1);
    edges[2 * i] = (i + 1) % n;
    edges[2 * i + 1] = (i + n - 1) % n;
  }
  MPI_Graph_create(base, n, index, edges, 0, &c);
  if (c != MPI_COMM_NULL) check_and_free("MPI_Graph_create:", &c);

  int neighbours[2] = {(rank + 1) % size, (rank + size - 1) % size}, weights[2] = {1, 1};
  MPI_Dist_graph_create_adjacent(base, 2, neighbours, weights, 2, neighbours, weights, MPI_INFO_NULL, 0, &c);
  check_and_free("MPI_Dist_graph_create_adjacent:", &c);

  /* The local communicator carries no attribute here: Open MPI's MPI_Intercomm_create runs its
   * copy callbacks (see constructors_intercomm_create.c). */
  MPI_Comm half, inter, merged;
  MPI_Comm_split(base, rank % 2, rank, &half);
  const int remote_leader = rank % 2 ? 0 : 1; /* rank in base of the other half's leader */
  MPI_Intercomm_create(half, 0, base, remote_leader, 7, &inter);
  MPI_Comm_set_attr(inter, k_user, (void*)4); /* inter's own attribute: not copied by the merge */
  MPI_Intercomm_merge(inter, rank % 2, &merged);
  check_and_free("MPI_Intercomm_merge:", &merged);
  MPI_Comm_delete_attr(inter, k_user);
  deletes = 0;
  check_and_free("MPI_Intercomm_create:", &inter);
  MPI_Comm_free(&half);

  MPI_Comm_free(&base);
  if (rank == 0)
    printf("constructors: freeing the parent ran %d delete callbacks; all constructors copied nothing %d\n", deletes,
           all_clean);
  MPI_Comm_free_keyval(&k_user);
  MPI_Comm_free_keyval(&k_dup);
  MPI_Finalize();
  return 0;
}
