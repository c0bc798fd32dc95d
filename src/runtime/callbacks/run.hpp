// Running a user callback under its frame (run.cpp), shared by the engine's invoker (invoker.cpp)
// and the trampolines the library calls in shadow mode (trampolines.cpp): the frame pushed and
// popped, an exception caught, a failure reported. Not a public header.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "attrcheck/engine.hpp"
#include "report/report.hpp"
#include "runtime/process/call_counts.hpp"
#include "runtime/callbacks/throw_site.hpp"
#include "runtime/process/fast_state.hpp"
#include "runtime/process/call.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// Pushes a frame for a callback about to run on this thread (built with outer = t_state.ctx.cb_top);
// pops it when it has returned.
class CbGuard {
 public:
  explicit CbGuard(CbFrame& frame) noexcept : frame_(frame) {
    std::atomic_signal_fence(std::memory_order_release);  // complete before the handler can see it
    t_state.ctx.cb_top = &frame;
  }
  ~CbGuard() {
    t_state.ctx.cb_top = frame_.outer;
    std::atomic_signal_fence(std::memory_order_release);
  }
  CbGuard(const CbGuard&) = delete;
  CbGuard& operator=(const CbGuard&) = delete;

 private:
  CbFrame& frame_;
};

// A C copy callback's call, counted (the caller pushes its frame): the invoker and the runners
// below make it.
inline int call_c_copy(ObjectKind kind, void* fn, Handle old, int key, std::uint64_t extra, std::uint64_t in,
                       std::uint64_t* out, int* flag) {
  count_call(Family::Callback, Lang::C);
  void* const extra_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(extra));
  void* const in_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(in));
  switch (kind) {
    case ObjectKind::Comm:
      return reinterpret_cast<MPI_Comm_copy_attr_function*>(fn)(from_handle<MPI_Comm>(old), key, extra_ptr, in_ptr, out, flag);
    case ObjectKind::Type:
      return reinterpret_cast<MPI_Type_copy_attr_function*>(fn)(from_handle<MPI_Datatype>(old), key, extra_ptr, in_ptr, out, flag);
    default:
      return reinterpret_cast<MPI_Win_copy_attr_function*>(fn)(from_handle<MPI_Win>(old), key, extra_ptr, in_ptr, out, flag);
  }
}

// A C delete callback's call.
inline int call_c_delete(ObjectKind kind, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra) {
  count_call(Family::Callback, Lang::C);
  void* const extra_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(extra));
  void* const value_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(value));
  switch (kind) {
    case ObjectKind::Comm:
      return reinterpret_cast<MPI_Comm_delete_attr_function*>(fn)(from_handle<MPI_Comm>(object), key, value_ptr, extra_ptr);
    case ObjectKind::Type:
      return reinterpret_cast<MPI_Type_delete_attr_function*>(fn)(from_handle<MPI_Datatype>(object), key, value_ptr, extra_ptr);
    default:
      return reinterpret_cast<MPI_Win_delete_attr_function*>(fn)(from_handle<MPI_Win>(object), key, value_ptr, extra_ptr);
  }
}

// A callback finding: "<what> <name> of keyval K<tail>" (`engine_key`: the keyval's, for its
// provenance; `first`: a provenance stack to put before it, where an exception was thrown).
void report_callback(Rule rule, const char* what, int keyval, const char* tail, const void* fn, int engine_key,
                     const ProvenanceInput* first = nullptr);
// callback.exception: what was thrown, with the stack that threw it (throw_site.hpp) before the
// keyval's creation. Called inside the catch handler.
void report_exception(const CbFrame& frame, int engine_key);
// "<what> <name> of keyval K<prefix><value> during <call>", e.g. " returned 5" or " set *flag = 7".
void report_callback_value(Rule rule, const char* what, int key, const char* prefix, long long value,
                           const void* fn, int engine_key);
// A copy callback that returned an error, or set *flag to neither 0 nor 1 (it did not throw).
void report_copy_result(int rc, int flag, int key, const void* fn, int engine_key);
// A copy callback of any binding (`lang`), run under its frame and checked.
int run_copy(ObjectKind kind, Binding lang, void* fn, Handle old, int key, std::uint64_t extra, std::uint64_t in,
             std::uint64_t* out, int* flag, int engine_key);

// Runs a callback under its frame (`invoke` calls it). A C++ exception it throws is caught and
// reported; the call then fails with MPI_ERR_OTHER and *threw is set.
template <typename Invoke>
inline int run_guarded(CbFrame& frame, int engine_key, bool* threw, Invoke&& invoke) {
  CbGuard guard(frame);
  throw_site_reset();
  try {
    return invoke();
  } catch (...) {
    report_exception(frame, engine_key);
    *threw = true;
    return MPI_ERR_OTHER;
  }
}


// Runs a delete callback under its frame (`invoke` calls it): a C++ exception it throws is caught,
// and that or an error it returns is reported.
template <typename Invoke>
inline int run_delete_as(CbFrame& frame, int engine_key, Invoke&& invoke) {
  bool threw = false;
  const int rc = run_guarded(frame, engine_key, &threw, std::forward<Invoke>(invoke));
  if (__builtin_expect(rc != MPI_SUCCESS && !threw, 0))
    report_callback_value(Rule::CallbackError, "delete callback", frame.keyval, " returned ", rc, frame.fn, engine_key);
  return rc;
}

// A C delete callback run as the engine's invoker runs it (invoker.cpp): its frame, an
// exception caught, an error reported. Returns what it returned (MPI_ERR_OTHER if it threw).
int run_c_delete(ObjectKind kind, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra);

// A delete callback the engine asks for that is not the invoker's common case (a Fortran one, or
// MPI_Finalize's), run under its frame.
int run_engine_delete(const DeleteCall& c);

// A delete callback of MPI_Finalize's teardown (MPI_COMM_WORLD's; out of line).
bool finalizing_delete(Handle object) noexcept;
// (Inline, the rest out of line: it runs in every delete trampoline. g_fast.open is cleared as
// MPI_Finalize begins: one load while MPI runs.)
[[gnu::always_inline]] inline bool teardown_delete(ObjectKind kind, Handle object) noexcept {
  return kind == ObjectKind::Comm && __builtin_expect(!g_fast.open.load(std::memory_order_relaxed), 0) &&
         finalizing_delete(object);
}

}  // namespace attrcheck::rt
