// What a refused call returns (see errors.hpp).
#include "runtime/process/errors.hpp"

#include <mpi.h>

#include "runtime/process/objects.hpp"
#include "runtime/process/rank_report.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/chain.hpp"

namespace attrcheck::rt {

int error_code(Result r, ObjectKind kind) noexcept {
  switch (error_class(r.status, kind)) {
    case ErrorClass::Success: return MPI_SUCCESS;
    case ErrorClass::Keyval: return MPI_ERR_KEYVAL;
    case ErrorClass::Arg: return MPI_ERR_ARG;
    case ErrorClass::Comm: return MPI_ERR_COMM;
    case ErrorClass::Type: return MPI_ERR_TYPE;
    case ErrorClass::Win: return MPI_ERR_WIN;
    case ErrorClass::Callback: return r.callback_rc ? r.callback_rc : MPI_ERR_OTHER;
    case ErrorClass::Other: return MPI_ERR_OTHER;
  }
  return MPI_ERR_OTHER;
}

namespace {
// Calls the error handler of the object, or of MPI_COMM_WORLD for calls without a live
// communicator or window (keyval calls, datatypes). `only_user`: skip the predefined handlers.
void call_errhandler(ObjectKind kind, Handle h, int code, bool only_user) {
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  if (kind == ObjectKind::Win && live_object(kind, h)) {
    MPI_Win win = from_handle<MPI_Win>(h);
    if (PMPI_Win_get_errhandler(win, &eh) != MPI_SUCCESS) return;
    const bool predefined = eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN;
    if (!only_user || !predefined) PMPI_Win_call_errhandler(win, code);
  } else {
    MPI_Comm comm = kind == ObjectKind::Comm && live_object(kind, h) ? from_handle<MPI_Comm>(h) : MPI_COMM_WORLD;
    if (PMPI_Comm_get_errhandler(comm, &eh) != MPI_SUCCESS) return;
    const bool predefined = eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN;
    if (!only_user || !predefined) PMPI_Comm_call_errhandler(comm, code);
  }
  if (eh != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&eh);
}
}  // namespace

int fail(const Call&, ObjectKind kind, Handle h, int code) {
  if (code == MPI_SUCCESS) return code;
  const Phase p = phase();
  if (p != Phase::Running && p != Phase::Finalizing) return code;  // no error handler exists
  switch (state().on_error) {
    case OnError::Report:
      call_errhandler(kind, h, code, /*only_user=*/true);
      return code;
    case OnError::Errhandler:
      state().run.status.store("errhandler");
      write_report();
      print_summary();
      call_errhandler(kind, h, code, /*only_user=*/false);
      state().run.status.store("running");
      return code;
    case OnError::Abort:
      state().run.status.store("aborted");
      write_report();
      print_summary();
      ATTRCHECK_LIBRARY(PMPI_Abort)(MPI_COMM_WORLD, code);
      return code;
  }
  return code;
}

}  // namespace attrcheck::rt
