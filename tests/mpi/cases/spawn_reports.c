// attrcheck-test: np=2 modes=shadow,emulate
// expect: keyval.leak
// expect-processes: 4
// expect-everywhere: keyval.leak
// exit: 0
// env: OMPI_MCA_btl_tcp_if_include=lo
// native-skip: 77
/* Spawned jobs: 2 parents spawn 2 children with MPI_Comm_spawn. Every process (parents and
 * children alike) leaks one keyval at its own site, so the merged report must hold 4 rank reports
 * (the children's world ranks 0 and 1 must not overwrite the parents' reports) and a keyval.leak
 * from each of them, with parents' and children's ranks kept apart.
 *
 * Where the MPI library cannot spawn here, the case is skipped, not failed, and never left
 * waiting: the program runs natively first and exits with 77 after printing the library's error
 * (run_case.py, native-skip). Errors are returned, not fatal, so that both failures end every
 * process: MPI_Comm_spawn failing (Debian's MPICH, 4.0.2 and 4.2.1 over UCX, fails every spawn;
 * Open MPI 5 when it is not allowed to oversubscribe), and a spawned job that cannot reach its
 * parents (Open MPI 5.0.7 reaches another job on the node through its TCP component only, its
 * shared-memory one not knowing that job's host, "is on host: unknown"; and the TCP component
 * finds no reachable pairing of interfaces unless it is given the loopback: the env line). A job
 * whose peers fail to reach it would wait for them for ever (Open MPI 5's launcher does not end
 * the parents' job when the children's aborts), so the first message goes both ways and each side
 * tells its own job whether it got through. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kCannotSpawnHere = 77 };

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

static int failed(int rc, const char* who, const char* call) {
  if (rc == MPI_SUCCESS) return 0;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fprintf(stderr, "spawn_reports: %s: %s failed: %s\n", who, call, text);
  return 1;
}

/* Rank 0 of each side sends first and then receives (the receive posted before the send): a peer
 * it cannot reach fails its send at once. Returns whether this job's rank 0 got through. */
static int exchange(MPI_Comm inter, int rank, const char* who, int send, int* received) {
  int ok = 1;
  if (rank == 0) {
    MPI_Request request;
    ok = !failed(MPI_Irecv(received, 1, MPI_INT, 0, 7, inter, &request), who, "MPI_Irecv") &&
         !failed(MPI_Send(&send, 1, MPI_INT, 0, 7, inter), who, "MPI_Send") &&
         !failed(MPI_Wait(&request, MPI_STATUS_IGNORE), who, "MPI_Wait");
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm parent;
  MPI_Comm_get_parent(&parent);
  if (parent == MPI_COMM_NULL) {
    leak_in_parent();
    MPI_Comm children;
    int errcodes[2];
    if (failed(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &children, errcodes),
               "parent", "MPI_Comm_spawn")) {
      MPI_Finalize();
      return kCannotSpawnHere;
    }
    MPI_Comm_set_errhandler(children, MPI_ERRORS_RETURN);
    int remote = 0;
    MPI_Comm_remote_size(children, &remote);
    int token = 0;
    if (!exchange(children, rank, "parent", 0, &token)) exit(kCannotSpawnHere);  // no MPI_Finalize: a job is unreachable
    MPI_Comm_disconnect(&children);
    if (rank == 0) printf("spawn_reports: parent spawned %d children, token %d\n", remote, token);
  } else {
    leak_in_child();
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    int go = 0;
    if (!exchange(parent, rank, "child", 42, &go)) exit(kCannotSpawnHere);
    MPI_Comm_disconnect(&parent);
  }
  MPI_Finalize();
  return 0;
}
