// Names and MPI error classes of the engine's vocabulary: one table per enum.
#include "attrcheck/engine.hpp"

namespace attrcheck {

const char* to_string(ObjectKind kind) noexcept {
  switch (kind) {
    case ObjectKind::Comm: return "comm";
    case ObjectKind::Type: return "datatype";
    case ObjectKind::Win: return "win";
  }
  return "?";
}

const char* to_string(Binding binding) noexcept {
  switch (binding) {
    case Binding::C: return "c";
    case Binding::FortranAint: return "fortran-aint";
    case Binding::FortranInt: return "fortran-integer";
  }
  return "?";
}

const char* to_string(CallbackCause cause) noexcept {
  switch (cause) {
    case CallbackCause::Dup: return "dup";
    case CallbackCause::Free: return "free";
    case CallbackCause::Set: return "set";
    case CallbackCause::Delete: return "delete";
    case CallbackCause::Finalize: return "finalize";
    case CallbackCause::DupRollback: return "dup-rollback";
  }
  return "?";
}

const char* to_string(ErrorClass cls) noexcept {
  switch (cls) {
    case ErrorClass::Success: return "MPI_SUCCESS";
    case ErrorClass::Keyval: return "MPI_ERR_KEYVAL";
    case ErrorClass::Arg: return "MPI_ERR_ARG";
    case ErrorClass::Comm: return "MPI_ERR_COMM";
    case ErrorClass::Type: return "MPI_ERR_TYPE";
    case ErrorClass::Win: return "MPI_ERR_WIN";
    case ErrorClass::Callback: return "callback's own code";
    case ErrorClass::Other: return "MPI_ERR_OTHER";
  }
  return "?";
}

namespace {
struct StatusRow {
  Status status;
  const char* name;
  ErrorClass cls;  // Comm stands for "the object kind's class"
};
constexpr StatusRow kStatusTable[] = {
    {Status::Ok, "ok", ErrorClass::Success},
    {Status::KeyvalInvalid, "keyval-invalid", ErrorClass::Keyval},
    {Status::KeyvalUnknown, "keyval-unknown", ErrorClass::Keyval},
    {Status::KeyvalFreed, "keyval-freed", ErrorClass::Keyval},
    {Status::KeyvalDoubleFree, "keyval-double-free", ErrorClass::Keyval},
    {Status::KeyvalKindMismatch, "keyval-kind-mismatch", ErrorClass::Keyval},
    {Status::KeyvalPredefined, "keyval-predefined", ErrorClass::Keyval},
    {Status::ObjectNull, "object-null", ErrorClass::Comm},
    {Status::ObjectUnknown, "object-unknown", ErrorClass::Comm},
    {Status::ObjectExists, "object-exists", ErrorClass::Comm},
    {Status::ObjectPredefined, "object-predefined", ErrorClass::Comm},
    {Status::NullArgument, "null-argument", ErrorClass::Arg},
    {Status::CallbackFailed, "callback-failed", ErrorClass::Callback},
    {Status::CallbackThrew, "callback-threw", ErrorClass::Callback},
    {Status::Reentrant, "reentrant", ErrorClass::Other},
    {Status::AttrAbsent, "attr-absent", ErrorClass::Success},
    {Status::Finalized, "finalized", ErrorClass::Other},
    {Status::CapacityExhausted, "capacity-exhausted", ErrorClass::Other},
};

const StatusRow* row(Status status) noexcept {
  for (const StatusRow& r : kStatusTable)
    if (r.status == status) return &r;
  return nullptr;
}
}  // namespace

const char* to_string(Status status) noexcept {
  const StatusRow* r = row(status);
  return r ? r->name : "?";
}

ErrorClass error_class(Status status, ObjectKind kind) noexcept {
  const StatusRow* r = row(status);
  if (!r) return ErrorClass::Other;
  if (r->cls != ErrorClass::Comm) return r->cls;
  switch (kind) {
    case ObjectKind::Comm: return ErrorClass::Comm;
    case ObjectKind::Type: return ErrorClass::Type;
    case ObjectKind::Win: return ErrorClass::Win;
  }
  return ErrorClass::Other;
}

}  // namespace attrcheck
