// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// skip-on standard-abi: MPICH's MPIX_ extensions are not part of the standard ABI (its mpi.h declares none)
// skip-on openmpi: MPIX_Stream_comm_create is MPICH's stream extension
// skip-on mpich-4.0: MPICH 4.0 has no streams (MPICH 4.1 added them)
/* Communicators made by MPICH's stream extension (MPIX_Stream_comm_create: a duplicate), each right
 * after the program freed a communicator that carried an attribute, so that the library hands the
 * freed handle out again: each carries an attribute, is used and freed, as natively, with no
 * finding. (Its multiplex form is
 * intercepted the same way, but not run here: MPICH 4.2.1's MPI_Comm_free of such a communicator
 * crashes natively in some runs.) */
#include <mpi.h>
#include <stdio.h>

static int deletes;

static int count_delete(MPI_Comm c, int key, void* v, void* extra) {
  (void)c; (void)key; (void)v; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, failed = 0, reused = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40100000
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &key, NULL);
  for (int i = 0; i < 4; ++i) {
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_set_attr(a, key, NULL);
    const MPI_Comm freed = a;
    MPI_Comm_free(&a);
    if (MPIX_Stream_comm_create(MPI_COMM_WORLD, MPIX_STREAM_NULL, &b) != MPI_SUCCESS) {
      ++failed;
      continue;
    }
    reused += b == freed;
    void* v = NULL;
    int flag = 1, size = 0;
    MPI_Comm_get_attr(b, key, &v, &flag); /* a duplicate of MPI_COMM_WORLD, which has no such attribute */
    if (flag || MPI_Comm_size(b, &size) != MPI_SUCCESS || size != 2) ++failed;
    MPI_Comm_set_attr(b, key, NULL);
    if (MPI_Comm_free(&b) != MPI_SUCCESS) ++failed;
  }
  MPI_Comm_free_keyval(&key);
#endif
  if (rank == 0) printf("handle_reuse_stream: %d failed, %d delete callbacks, handle reused %s\n", failed, deletes,
                        reused ? "yes" : "no");
  MPI_Finalize();
  return 0;
}
