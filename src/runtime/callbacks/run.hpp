// Running a user callback under its frame, shared by the engine's invoker (callbacks.cpp) and
// the trampolines the library calls in shadow mode (trampolines.cpp): the frame pushed and
// popped, an exception caught, a failure reported. Not a public header.
#pragma once

#include <atomic>
#include <utility>

#include "runtime/fast_path.hpp"
#include "runtime/process/thread_state.hpp"
#include "runtime/callbacks/throw_site.hpp"

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

// A delete callback of MPI_Finalize's teardown (MPI_COMM_WORLD's; out of line).
bool finalizing_delete(Handle object) noexcept;
// (Inline, the rest out of line: it runs in every delete trampoline. g_fast.open is cleared as
// MPI_Finalize begins: one load while MPI runs.)
[[gnu::always_inline]] inline bool teardown_delete(ObjectKind kind, Handle object) noexcept {
  return kind == ObjectKind::Comm && __builtin_expect(!g_fast.open.load(std::memory_order_relaxed), 0) &&
         finalizing_delete(object);
}

}  // namespace attrcheck::rt
