// The quiet replay (quiet_replay.hpp): the thread's own Replay that the C set and delete wrappers'
// quick ways of a keyval with a user delete function install while the library runs the call
// (set_path.hpp), and its runs handed to a replay scope when the library ran something else than
// the model requires (the set and delete hooks then mirror the call with them).
#include "runtime/fast/quiet_replay.hpp"

namespace attrcheck::rt {

namespace {
// The thread's quiet replay, made on first use (a Replay is not constant-initialisable data, so
// it cannot join t_state), and unhooked from t_state.ctx.quiet when the thread's storage goes.
struct QuietHolder {
  Replay replay;
  ~QuietHolder() { t_state.ctx.quiet = nullptr; }
};
}  // namespace

void install_quiet_replay() noexcept {
  static thread_local QuietHolder holder;
  t_state.ctx.quiet = &holder.replay;
}

void take_quiet(ReplayScope& scope, ObjectKind kind, bool expected) noexcept {
  Replay& to = scope.replay();
  // The expected run, if the call armed one and the trampoline marked it (thread_state.hpp:
  // ExpectedRun), is a run like the others; disarmed either way. (A call that armed none, a
  // first set, finds the mark of an earlier call's run: not its own.)
  ExpectedRun& e = t_state.ctx.expected;
  if (expected && e.state == kExpectRan)
    to.seen.push_back(Observation{false, kind, e.object, e.engine_id, MPI_SUCCESS, e.value, 0, 0, false, 0});
  e.state = kExpectNone;
  Replay* const quiet = t_state.ctx.quiet;
  if (!quiet) return;
  for (const Observation& o : quiet->seen) to.seen.push_back(o);
  quiet->seen.clear();
}

}  // namespace attrcheck::rt
