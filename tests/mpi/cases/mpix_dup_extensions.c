// attrcheck-test: np=2 modes=shadow,emulate
// clean
// exit: 0
// native: same-stdout
// native-skip: 77
// skip-on standard-abi: MPICH's MPIX_ extensions are not part of the standard ABI (its mpi.h declares none)
// skip-on openmpi: MPICH's extensions (MPIX_Stream_comm_create, MPIX_Threadcomm_init); Open MPI has neither
/* MPICH's stream and thread communicators are duplicates of their parent: MPIX_Stream_comm_create
 * and MPIX_Threadcomm_init (and MPIX_Stream_comm_create_multiplex: mpix_stream_multiplex.c, as
 * MPICH 5.0.2 asserts in it natively) make the new communicator with
 * MPIR_Comm_dup_impl, so attributes are copied by their copy callbacks, as MPI_Comm_dup does;
 * MPI_Comm_free and MPIX_Threadcomm_free (MPIR_Comm_free_impl) run their delete callbacks. A
 * correct program: the callbacks must run as natively (in emulate mode attrcheck runs them
 * itself, so a constructor it did not intercept would copy nothing), and nothing be reported.
 * (The thread communicator is only made and freed: MPICH's MPI_Comm_get_attr crashes on one
 * outside MPIX_Threadcomm_start/finish.)
 * MPICH before 4.1 has no streams (nor, before 4.2, thread communicators): skipped there. */
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
  fprintf(stderr, "mpix_dup_extensions: this MPICH has no MPIX_Stream_comm_create (MPICH 4.1 on)\n");
  MPI_Finalize();
  return kNotHere;
#else
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int key;
  MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL);
  MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void*)100);

  MPI_Comm stream, threads;
  MPIX_Stream_comm_create(MPI_COMM_WORLD, MPIX_STREAM_NULL, &stream);
  MPIX_Threadcomm_init(stream, 1, &threads);
  const long values[1] = {value_on(stream, key)};

  MPIX_Threadcomm_free(&threads);
  MPI_Comm_free(&stream);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
  MPI_Comm_free_keyval(&key);
  if (rank == 0)
    printf("mpix_dup_extensions: value %ld, %d copies, %d deletes, thread communicator freed: %s\n",
           values[0], copies, deletes, threads == MPI_COMM_NULL ? "yes" : "no");
  MPI_Finalize();
  return 0;
#endif
}
