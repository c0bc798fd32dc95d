// What a refused call returns: the error code of an engine result, and --on-error applied (the
// error handler called, or the report written and MPI aborted). Not a public header.
#pragma once

#include "attrcheck/engine.hpp"
#include "runtime/process/call.hpp"

namespace attrcheck::rt {

// The MPI error code for an engine result.
int error_code(Result r, ObjectKind kind) noexcept;
// Applies --on-error to a refused call and returns what the call returns.
int fail(const Call& call, ObjectKind kind, Handle h, int code);

}  // namespace attrcheck::rt
