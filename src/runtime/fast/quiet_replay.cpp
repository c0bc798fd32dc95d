// The quiet replay (quiet_replay.hpp): the thread's own Replay that the C set and delete wrappers'
// quick ways of a keyval with a user delete function install while the library runs the call
// (set_path.hpp), and what happens when the library ran something else than the model requires.
#include "runtime/fast/quiet_replay.hpp"

#include "runtime/set_path.hpp"

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

namespace {
int set_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc, bool expected) {
  const Call call{&api, caller};
  CallScope scope(call);
  ReplayScope replay(call, false);
  take_quiet(replay, call.api->kind, expected);
  return mirror_library_set(call, h, key, word, rc, replay);
}
}  // namespace

int quiet_set_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc) {
  return set_mirrored(api, caller, h, key, word, rc, false);
}

int quiet_replace_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc) {
  return set_mirrored(api, caller, h, key, word, rc, true);
}

int quiet_delete_mirrored(const Call& call, Handle h, int key, int engine_key, int rc) {
  ReplayScope replay(call, false);
  take_quiet(replay, call.api->kind, true);
  return delete_not_cancelled(call, h, key, engine_key, rc, replay);
}

}  // namespace attrcheck::rt
