// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.leak
// expect-processes: 4
// expect-everywhere: keyval.leak
// exit: 0
// skip-on mpich: Debian's MPICH 4.0.2 (ch4:ucx) fails every MPI_Comm_spawn natively ("Error in spawn call")
/* Spawned jobs: 2 parents spawn 2 children with MPI_Comm_spawn. Every process (parents and
 * children alike) leaks one keyval at its own site, so the merged report must hold 4 rank reports
 * (the children's world ranks 0 and 1 must not overwrite the parents' reports) and a keyval.leak
 * from each of them, with parents' and children's ranks kept apart. */
#include <mpi.h>
#include <stdio.h>

static void leak_in_parent(void) {
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  /* BUG: never freed */
}

static void leak_in_child(void) {
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
  /* BUG: never freed */
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);
  if (parent == MPI_COMM_NULL) {
    leak_in_parent();
    MPI_Comm children;
    int errcodes[2];
    MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &children, errcodes);
    int remote = 0;
    MPI_Comm_remote_size(children, &remote);
    int token = 0;
    if (rank == 0) MPI_Recv(&token, 1, MPI_INT, 0, 7, children, MPI_STATUS_IGNORE);
    MPI_Comm_disconnect(&children);
    if (rank == 0) printf("spawn_reports: parent spawned %d children, token %d\n", remote, token);
  } else {
    leak_in_child();
    int token = 42;
    if (rank == 0) MPI_Send(&token, 1, MPI_INT, 0, 7, parent);
    MPI_Comm_disconnect(&parent);
  }
  MPI_Finalize();
  return 0;
}
