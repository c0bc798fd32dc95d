// The thread-local block and what reads it out of line: the names of calls for findings, the
// callback frames walked, and the thread's identity.
#include "runtime/process/thread_state.hpp"

#include <strings.h>

#include "runtime/process/state.hpp"

namespace attrcheck::rt {

CbFrame kUnchecked{nullptr, 0, nullptr, nullptr, 0, ObjectKind::Comm, false, false};
CbFrame kInFortran{nullptr, ~Handle{0}, nullptr, nullptr, 0, ObjectKind::Comm, false, false};
__thread ThreadState t_state{{}, {nullptr, &kUnchecked, nullptr, 0, {}, nullptr, {}}, {}, {}};

const char* call_name_of(const Call* call) noexcept {
  if (call && call->api) return call->api->name;
  return phase() == Phase::Finalizing ? "MPI_Finalize" : "MPI";
}

const char* current_call_name() noexcept { return call_name_of(t_state.ctx.call); }

bool in_callback_for_slow(ObjectKind kind, Handle h) noexcept {
  for (const CbFrame* f = t_state.ctx.cb_top; f && f != &kUnchecked; f = f->outer)
    if (f != &kInFortran && f->kind == kind && f->object == h) return true;
  return false;
}

bool in_free_callback_for(ObjectKind kind, Handle h) noexcept {
  static const char* const frees[] = {"MPI_Comm_free", "MPI_Type_free", "MPI_Win_free"};
  for (const CbFrame* f = t_state.ctx.cb_top; f && f != &kUnchecked; f = f->outer)
    if (f != &kInFortran && f->kind == kind && f->object == h && !f->copy && f->call && f->call->api)
      return !strcasecmp(f->call->api->name, frees[static_cast<int>(kind)]);
  return false;
}

bool in_teardown_callback_slow() noexcept {
  for (const CbFrame* f = t_state.ctx.cb_top; f && f != &kUnchecked; f = f->outer)
    if (f->teardown) return true;
  return false;
}

namespace {
thread_local char t_token;  // its address identifies the thread
}  // namespace

const void* thread_token() noexcept { return &t_token; }

}  // namespace attrcheck::rt
