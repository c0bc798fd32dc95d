// The quiet replay (runtime.hpp): the thread's own Replay that the C set and delete wrappers'
// quick ways of a keyval with a user delete function install while the library runs the call
// (set_path.hpp), and what happens when the library ran something else than the model requires.
#include "runtime/hooks.hpp"
#include "runtime/runtime.hpp"
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

void take_quiet(ReplayScope& scope) noexcept {
  Replay* const quiet = t_state.ctx.quiet;
  if (!quiet) return;
  Replay& to = scope.replay();
  for (const Observation& o : quiet->seen) to.seen.push_back(o);
  quiet->seen.clear();
}

int quiet_set_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc) {
  const Call call{&api, caller};
  CallScope scope(call);
  ReplayScope replay(call, false);
  take_quiet(replay);
  return mirror_library_set(call, h, key, word, rc, replay);
}

int quiet_delete_mirrored(const Call& call, Handle h, int key, int engine_key, int rc) {
  ReplayScope replay(call, false);
  take_quiet(replay);
  return delete_not_cancelled(call, h, key, engine_key, rc, replay);
}

}  // namespace attrcheck::rt
