// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// native-skip: 77, 1
// skip-on standard-abi: MPICH's MPIX_ extensions are not part of the standard ABI (its mpi.h declares none)
// skip-on openmpi: MPICH's extension (MPIX_Stream_comm_create_multiplex); Open MPI has none
/* MPICH's MPIX_Stream_comm_create_multiplex makes a duplicate of its parent (MPIR_Comm_dup_impl),
 * so attributes are copied by their copy callbacks, as MPI_Comm_dup does, and MPI_Comm_free runs
 * their delete callbacks: the callbacks must run as natively and nothing be reported. Natively,
 * MPICH 5.0.2 aborts inside the call (an assertion in its src/mpi/misc/utils.c, line 418, then
 * "Abort(1) ... Internal error": status 1), which no program can ask beforehand: the harness's
 * native run comes first and skips the case there, with MPICH's words. MPICH before 4.1 has no
 * streams: the program says so and exits 77, skipped. (Split from mpix_dup_extensions.c, which
 * runs everywhere MPICH has streams.) */
#include <mpi.h>
#include <stdio.h>

enum { kNotHere = 77 };

#if defined(MPIX_STREAM_NULL)
static int copies = 0, deletes = 0;

static int copy_fn(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm; (void)keyval; (void)extra;
  ++copies;
  *(void**)out = (char*)in + 1;
  *flag = 1;
  return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm; (void)keyval; (void)value; (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

static long value_on(MPI_Comm comm, int key) {
  void* v = NULL;
  int flag = 0;
  MPI_Comm_get_attr(comm, key, &v, &flag);
  return flag ? (long)(size_t)v : -1;
}
#endif

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
#if !defined(MPIX_STREAM_NULL)
  fprintf(stderr, "mpix_stream_multiplex: this MPICH has no MPIX_Stream_comm_create (MPICH 4.1 on)\n");
  MPI_Finalize();
  return kNotHere;
#else
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int key;
  MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void*)100);

  MPI_Comm stream, multiplex;
  MPIX_Stream none[1] = {MPIX_STREAM_NULL};
  MPIX_Stream_comm_create(MPI_COMM_WORLD, MPIX_STREAM_NULL, &stream);
  MPIX_Stream_comm_create_multiplex(stream, 1, none, &multiplex);
  const long values[2] = {value_on(stream, key), value_on(multiplex, key)};
  MPI_Comm_free(&multiplex);
  MPI_Comm_free(&stream);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
  MPI_Comm_free_keyval(&key);
  if (rank == 0)
    printf("mpix_stream_multiplex: values %ld %ld, %d copies, %d deletes\n", values[0], values[1], copies, deletes);
  MPI_Finalize();
  return 0;
#endif
}
