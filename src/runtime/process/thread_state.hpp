// What each thread is running, in one thread-local block (t_state): the intercepted call, the
// callback frames, the replay collecting the library's runs, and beside them the thread's query
// cache, deferred sets and call counts. Not a public header.
#pragma once

#include <atomic>
#include <cstdint>

#include "attrcheck/engine.hpp"
#include "report/report.hpp"
#include "runtime/fast/pending_sets.hpp"
#include "runtime/fast/query_cache.hpp"
#include "runtime/profile/mpi_profile.hpp"
#include "runtime/process/call.hpp"

namespace attrcheck::rt {

// A callback of ours running on this thread: frames live on the stack of the code that runs the
// callback, linked innermost first from t_state.ctx.cb_top. Plain data, so the fatal-signal handler can
// name the callback that crashed. The chain ends in nullptr, or in kUnchecked until the thread
// has passed the thread-level check: then t_state.ctx.cb_top == nullptr alone says "a checked thread, no
// callback running", the inline paths' one test.
struct CbFrame {
  const void* fn;
  Handle object;     // the object it runs for (the old one for a copy callback)
  // The intercepted call that ran it (its name: call_name_of), or nullptr: a call the library
  // made of its own. (The call, not its name: the name is two loads away, and the frame is built
  // on every callback run while a crash is what reads it.)
  const Call* call;
  CbFrame* outer;
  int keyval;        // as the user holds it
  ObjectKind kind;
  bool copy;
  bool teardown;     // a delete callback of MPI_Finalize's teardown
};
extern CbFrame kUnchecked;
struct Replay;
// The object adopt() last registered on this thread (objects.hpp): a hook that adopted its object
// does not know it was live, so the library's refusal of it is no divergence. Hooks clear it first.
struct Adopted {
  Handle h;
  ObjectKind kind;
  bool set;
  bool was_freed;  // the tool had seen it freed (the library vouched for it, see adopt)
};
// The one delete callback run a quick way of a shadow set or delete expects the library to make
// while the quiet replay collects (set_path.hpp: the replacing set, the cancelling delete): the
// delete trampoline that makes exactly this run, successfully, marks it run (kRan) and logs
// nothing; any other run is logged in the quiet replay as usual. (Arming and testing it is
// cheaper than logging the run and reading it back.)
enum : int { kExpectNone = 0, kExpectArmed = 1, kExpectRan = 2 };
struct ExpectedRun {
  Handle object;
  std::uint64_t value;
  int engine_id;
  int state;  // kExpect*: armed before the library's call; kRan, or back to kNone out of line
};
// What this thread is running, in one thread-local block: the paths that read or set several of
// these (a trampoline: all three; a set: the call and the replay) find them from one TLS offset
// (each variable of its own cost a GOT load per access, and gcc loaded them again after stores).
// (call and replay are not neighbours: gcc's vectoriser paired their stores in a set's scopes
// through an xmm register and a stack slot, two instructions more than two stores.)
struct ThreadContext {
  const Call* call;    // the innermost intercepted call (CallScope, below)
  CbFrame* cb_top;     // the innermost callback frame (above), or nullptr / kUnchecked
  Replay* replay;      // the innermost replay collecting the library's runs (replay.hpp: ReplayScope)
  int throw_depth;     // the last throw's recorded stack depth since a callback began (throw_site.hpp)
  Adopted adopted;     // (above; the cancelled delete clears it on its way to the library)
  Replay* quiet;       // the thread's quiet replay (quiet_replay.hpp), or nullptr: none yet
  ExpectedRun expected;  // (above)
};
// The calls this thread's wrappers received and the callbacks it ran, by family and binding
// (call_counts.hpp): counted in place, with no test, read by the report through a registry.
struct CallCounts {
  std::atomic<std::uint64_t> n[kCallFamilies][kCallBindings];
  bool registered;
};
// This thread's context, query cache and pending sets, in one thread-local block: the inline
// paths' test of cb_top, their cache lookup and a deferred set's record use one TLS offset (a GOT
// load each, and the thread pointer's, fewer). (The block is initialised data, for cb_top's
// kUnchecked: a new thread copies its ~38 KiB where it zeroed them.)
// (__thread, not thread_local: constant-initialised, so reading it needs no TLS init call.)
struct ThreadState {
  QueryCache queries;
  ThreadContext ctx;
  PendingSets pending;
  CallCounts counts;
};
extern __thread ThreadState t_state;

// A library whose Fortran bindings enter through the C ones (MPICH: mpi_comm_dup_ calls
// MPI_Comm_dup) would show the C wrappers a Fortran call a second time. While a Fortran wrapper
// forwards to the library, kInFortran is the top frame: the C wrappers' one inline test
// (t_state.ctx.cb_top) sends them to the full hook, whose enter() passes a C call made under it straight
// to the library. A callback the library runs meanwhile pushes its own frame over it, so the
// calls it makes are checked as usual.
extern CbFrame kInFortran;
template <typename Fn, typename... A>
inline void forward_fortran(Fn fn, A... a) {
  if constexpr (kProfile.fortran_enters_through_c) {
    CbFrame* const outer = t_state.ctx.cb_top;
    t_state.ctx.cb_top = &kInFortran;
    fn(a...);
    t_state.ctx.cb_top = outer;
  } else {
    fn(a...);
  }
}

// Callbacks running on this thread: the frames from t_state.ctx.cb_top.
bool in_callback_for_slow(ObjectKind kind, Handle h) noexcept;
bool in_teardown_callback_slow() noexcept;
inline bool in_callback_for(ObjectKind kind, Handle h) noexcept {  // on this thread
  return t_state.ctx.cb_top && in_callback_for_slow(kind, h);
}
// Whether a delete callback an intercepted free of the object (MPI_Comm_free ...) ran is running.
bool in_free_callback_for(ObjectKind kind, Handle h) noexcept;
inline bool in_teardown_callback() noexcept {  // a callback of MPI_Finalize's teardown
  return t_state.ctx.cb_top && in_teardown_callback_slow();
}

const char* current_call_name() noexcept;  // the intercepted call on this thread, for findings
// A call's name for findings (CbFrame::call): nullptr is the library's own (MPI_Finalize's, or "MPI").
const char* call_name_of(const Call* call) noexcept;

// Marks the intercepted call in progress on this thread (callbacks name it in findings).
class CallScope {
 public:
  explicit CallScope(const Call& call) noexcept : outer_(t_state.ctx.call) { t_state.ctx.call = &call; }
  ~CallScope() { t_state.ctx.call = outer_; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  const Call* outer_;
};

// Identifies the calling thread (the first one is "the main thread" below MPI_THREAD_SERIALIZED).
const void* thread_token() noexcept;

}  // namespace attrcheck::rt
