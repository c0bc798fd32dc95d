// attrcheck-test: np=2 modes=shadow
// divergence: intercomm-create-runs-copy-callbacks
// expect-portable-on openmpi/shadow: portability.intercomm-create-runs-copy-callbacks mpich-4.0 mpich-4.2 mpich-5.0
// clean
// exit: 0
/* A correct program that Open MPI 4.1 runs differently from the standard: MPI_Intercomm_create
 * must not copy attributes, but Open MPI duplicates the local communicator internally, running its
 * copy callbacks onto a hidden communicator (not the intercommunicator returned), and runs the
 * copy's delete callback when the intercommunicator is freed. Shadow mode reports it as
 * impl.divergence; the program itself only prints what it saw. Needs an even number of processes. */
#include <mpi.h>
#include <stdio.h>

static int copies = 0, deletes = 0;

static int counting_copy(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = (void*)((size_t)in + 10);
  *flag = 1;
  return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  int key;
  MPI_Comm_create_keyval(counting_copy, counting_delete, &key, NULL);
  MPI_Comm half, inter;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_set_attr(half, key, (void*)4);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 7, &inter);
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(inter, key, &v, &flag);
  MPI_Comm_free(&inter);
  const int deletes_inter = deletes;
  MPI_Comm_free(&half);

  if (rank == 0)
    printf("constructors_intercomm_create: intercommunicator attr %d, copy callbacks %d, delete callbacks on its "
           "free %d; on the local communicator's free %d\n",
           flag, copies, deletes_inter, deletes - deletes_inter);
  MPI_Comm_free_keyval(&key);
  MPI_Finalize();
  return 0;
}
