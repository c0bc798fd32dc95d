/* A PMPI tool in the manner of mpiP: it wraps MPI_Init, MPI_Init_thread, MPI_Finalize and some
 * communicator, keyval, attribute and point-to-point calls, counts each, and passes every call to
 * the library's PMPI_ twin directly (so a tool loaded after it never sees the call). Its own
 * MPI_Init or MPI_Init_thread initialises it; a wrapped call that arrives while it is not
 * initialised is recorded. At MPI_Finalize it writes $STACK_TOOL_OUT/direct.RANK.txt: one
 * "NAME COUNT" line per wrapped function, then "initialised: yes" or "initialised: no" (no when
 * its MPI_Init never ran or a call came before it). Without MPI_Finalize it writes nothing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { INIT, INIT_THREAD, FINALIZE, COMM_DUP, COMM_FREE, CREATE_KEYVAL, SET_ATTR, FREE_KEYVAL, SENDRECV, COUNT };
static const char* const names[COUNT] = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize",
                                         "MPI_Comm_dup", "MPI_Comm_free", "MPI_Comm_create_keyval",
                                         "MPI_Comm_set_attr", "MPI_Comm_free_keyval", "MPI_Sendrecv"};
static long calls[COUNT];
static int initialised;         /* the tool's MPI_Init or MPI_Init_thread ran */
static int uninitialised_call;  /* a wrapped call came while it was not initialised */

static void enter(int fn) {
  ++calls[fn];
  if (!initialised) uninitialised_call = 1;
}

int MPI_Init(int* argc, char*** argv) {
  ++calls[INIT];
  initialised = 1;
  return PMPI_Init(argc, argv);
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  ++calls[INIT_THREAD];
  initialised = 1;
  return PMPI_Init_thread(argc, argv, required, provided);
}

int MPI_Finalize(void) {
  enter(FINALIZE);
  const char* dir = getenv("STACK_TOOL_OUT");
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/direct.%d.txt", dir, rank);
    FILE* f = fopen(path, "w");
    if (f) {
      for (int i = 0; i < COUNT; ++i) fprintf(f, "%s %ld\n", names[i], calls[i]);
      fprintf(f, "initialised: %s\n", initialised && !uninitialised_call ? "yes" : "no");
      fclose(f);
    }
  }
  return PMPI_Finalize();
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  enter(COMM_DUP);
  return PMPI_Comm_dup(comm, newcomm);
}

int MPI_Comm_free(MPI_Comm* comm) {
  enter(COMM_FREE);
  return PMPI_Comm_free(comm);
}

int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* copy_fn, MPI_Comm_delete_attr_function* delete_fn,
                           int* keyval, void* extra_state) {
  enter(CREATE_KEYVAL);
  return PMPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state);
}

int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void* value) {
  enter(SET_ATTR);
  return PMPI_Comm_set_attr(comm, keyval, value);
}

int MPI_Comm_free_keyval(int* keyval) {
  enter(FREE_KEYVAL);
  return PMPI_Comm_free_keyval(keyval);
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  enter(SENDRECV);
  return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                       comm, status);
}
