// attrcheck-test: np=2 modes=shadow
// expect: impl.divergence
// clean
// expect-message: impl.divergence passed 0x63 to a delete callback where the attribute's value is 0x4
/* A delete of a deferred set that is not the one deferred last (set_path.hpp: checked_delete
 * takes the last pending record's entry only if it holds the deleted query). Two keyvals, A with
 * a user delete callback and B with MPI_COMM_NULL_DELETE_FN, are set in turn and deleted in the
 * order they were set, so each delete of A comes while B's set is the last one pending. In the
 * last round A's value is replaced behind attrcheck's back (PMPI_), so the library runs A's
 * delete callback with 99 where the model holds 4: the delete must be mirrored in full for A
 * (the divergence named above, nothing else), never as a delete of B, which would leave the
 * model holding A and lacking B (attr.absent on B's delete, more divergences at the free). */
#include <mpi.h>
#include <stdio.h>

static long deleted;

static int count_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)extra;
  deleted += (long)value;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int ka, kb;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &ka, NULL);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kb, NULL);
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  void* v = NULL;
  int fa = 0, fb = 0;
  for (long i = 1; i <= 4; ++i) {
    /* (The gets read both answers afresh, so that both sets are deferred.) */
    MPI_Comm_get_attr(c, ka, &v, &fa);
    MPI_Comm_get_attr(c, kb, &v, &fb);
    MPI_Comm_set_attr(c, ka, (void*)i);
    MPI_Comm_set_attr(c, kb, (void*)i);
    if (i == 4) PMPI_Comm_set_attr(c, ka, (void*)99); /* unseen: the library holds 99, the model 4 */
    MPI_Comm_delete_attr(c, ka);
    MPI_Comm_delete_attr(c, kb);
  }
  MPI_Comm_get_attr(c, ka, &v, &fa);
  MPI_Comm_get_attr(c, kb, &v, &fb);
  MPI_Comm_free(&c);
  MPI_Comm_free_keyval(&ka);
  MPI_Comm_free_keyval(&kb);
  if (rank == 0) printf("delete callbacks saw %ld in all; flags after %d %d\n", deleted, fa, fb);
  MPI_Finalize();
  return 0;
}
