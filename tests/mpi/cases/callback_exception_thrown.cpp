// attrcheck-test: np=1 modes=shadow,emulate
// expect: callback.exception
// expect-where: callback.exception throwing_delete
// expect-provenance: callback.exception check_value(void*):27 exception thrown
// expect-message: callback.exception delete callback
// expect-message: callback.exception threw int (caught by attrcheck
// clean
// exit: 0
/* callback.exception names what was thrown and where: a delete callback first throws and catches
 * a std::logic_error of its own (no finding: it never leaves the callback), then calls a helper
 * that throws an int, which escapes. The finding's "exception thrown" stack starts at the helper's
 * throw, not at the callback or at the exception the callback handled itself. */
#define OMPI_SKIP_MPICXX 1 /* the C API only: no C++ bindings to link */
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <stdexcept>

static int handled = 0;

static int checks = 0;

/* Throws the first time only: a library that keeps the attribute after a failed delete (MPICH)
 * runs the callback again at MPI_Finalize, which must then succeed. */
__attribute__((noinline)) static void check_value(void* value) {
  if (value == reinterpret_cast<void*>(7) && checks++ == 0) throw 42; /* BUG: escapes the delete callback */
}

extern "C" int throwing_delete(MPI_Comm, int, void* value, void*) {
  try {
    throw std::logic_error("handled inside the callback");
  } catch (const std::logic_error&) {
    ++handled;
  }
  check_value(value);
  return MPI_SUCCESS;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  int key;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, throwing_delete, &key, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, reinterpret_cast<void*>(7));
  const int rc = MPI_Comm_delete_attr(MPI_COMM_SELF, key);
  MPI_Comm_free_keyval(&key);
  std::printf("callback_exception_thrown: handled %d, delete failed %d\n", handled, rc != MPI_SUCCESS ? 1 : 0);
  MPI_Finalize();
  return 0;
}
