// attrcheck-test: np=2 modes=shadow,emulate
// expect: callback.exception
// expect-where: callback.exception throwing_copy
// expect-provenance: callback.exception throwing_copy:23 exception thrown
// expect-message: callback.exception threw std::runtime_error ("copy refused")
// rank-symbolized: callback.exception throwing_copy callback_exception.cpp
// clean
// exit: 0
/* callback.exception (C++): a copy callback throws std::runtime_error during MPI_Comm_dup. The
 * exception must not unwind through MPI: under the tool it is caught, the dup fails, and the
 * program goes on. */
#define OMPI_SKIP_MPICXX 1 /* the C API only: no C++ bindings to link */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <stdexcept>

static int copies = 0;

extern "C" int throwing_copy(MPI_Comm, int, void*, void*, void*, int*) {
  ++copies;
  throw std::runtime_error("copy refused"); /* BUG */
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

  int key;
  MPI_Comm_create_keyval(throwing_copy, MPI_COMM_NULL_DELETE_FN, &key, nullptr);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_set_attr(comm, key, reinterpret_cast<void*>(1));

  MPI_Comm copy = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(comm, &copy);
  const bool failed = rc != MPI_SUCCESS;
  if (!failed && copy != MPI_COMM_NULL) MPI_Comm_free(&copy);

  /* The program continues: the communicator and the key still work. */
  void* got = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, key, &got, &flag);
  const bool intact = flag && got == reinterpret_cast<void*>(1);
  MPI_Comm_free(&comm);
  MPI_Comm_free_keyval(&key);
  MPI_Barrier(MPI_COMM_WORLD);

  if (rank == 0)
    std::printf("callback_exception: copy callback ran %d time(s), dup failed %d, attribute intact %d\n", copies,
                failed ? 1 : 0, intact ? 1 : 0);
  MPI_Finalize();
  return 0;
}
