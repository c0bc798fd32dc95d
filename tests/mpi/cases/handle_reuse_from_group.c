// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// skip-on openmpi-4.1: Open MPI 4.1 has no MPI-4.0 MPI_Comm_create_from_group / MPI_Intercomm_create_from_groups
/* Communicators made by the MPI-4.0 group constructors (MPI_Comm_create_from_group,
 * MPI_Intercomm_create_from_groups), each right after the program freed a communicator, so that
 * the library hands the freed handle out again: each is used and freed, as natively, with no
 * finding. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, failed = 0, reused = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5) /* (Open MPI 5 says MPI 3.1) */
  MPI_Group world, self;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Comm_group(MPI_COMM_SELF, &self);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  for (int i = 0; i < 4; ++i) {
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    const MPI_Comm freed = a;
    MPI_Comm_free(&a);
    int rc;
    if (i % 2 == 0) {
      rc = MPI_Comm_create_from_group(world, "attrcheck.from_group", MPI_INFO_NULL, MPI_ERRORS_RETURN, &b);
    } else {
      /* Rank 0's group and rank 1's, joined: each side's local group is itself. */
      MPI_Group other;
      const int peer = 1 - rank;
      MPI_Group_incl(world, 1, &peer, &other);
      rc = MPI_Intercomm_create_from_groups(self, 0, other, 0, "attrcheck.from_groups", MPI_INFO_NULL,
                                            MPI_ERRORS_RETURN, &b);
      MPI_Group_free(&other);
    }
    if (rc != MPI_SUCCESS) { ++failed; continue; }
    reused += b == freed;
    void* v = NULL;
    int flag = 0;
    if (MPI_Comm_set_attr(b, key, (void*)5) != MPI_SUCCESS) ++failed;
    if (MPI_Comm_get_attr(b, key, &v, &flag) != MPI_SUCCESS || !flag || v != (void*)5) ++failed;
    if (MPI_Comm_free(&b) != MPI_SUCCESS) ++failed;
  }
  MPI_Comm_free_keyval(&key);
  MPI_Group_free(&self);
  MPI_Group_free(&world);
#endif
  if (rank == 0) printf("handle_reuse_from_group: %d failed, handle reused %s\n", failed, reused ? "yes" : "no");
  MPI_Finalize();
  return 0;
}
