// Shadow mode, the quiet replay: the thread's own Replay that the quick ways of a set or delete
// install while the library runs the call (quiet_replay.cpp). Not a public header.
#pragma once

#include "attrcheck/engine.hpp"
#include "runtime/callbacks/replay.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// Shadow mode, the quiet replay (set_path.hpp): a Replay of the thread's own, kept from one
// call to the next, that the C set and delete wrappers' quick ways of a keyval with a user delete
// function install as t_state.ctx.replay (one store, and one to take it down) while the library
// runs the call, where a ReplayScope built and took down a Replay on the stack every call. It
// collects the callbacks the library runs as a ReplayScope's would; a call that ran what the
// model requires (nothing, or the old value's delete callback, which the trampoline marks
// instead of logging it: thread_state.hpp, ExpectedRun) leaves it empty, anything else hands its
// runs to a ReplayScope (take_quiet) and is mirrored as before. Installed only where no replay
// collects (t_state.ctx.replay == nullptr), so it is never in two uses at once: a quick way that
// finds a replay installed (a call the library makes through MPI_ inside another) takes the
// scoped way. t_state.ctx.quiet: nullptr until the thread's first out-of-line shadow set
// (install_quiet_replay), and again once the thread's storage is gone (thread exit).
void install_quiet_replay() noexcept;
// Moves the quiet replay's runs into `scope`'s replay and empties it; first, if the call
// `expected` a run and it was made (thread_state.hpp: ExpectedRun), that run (on `kind`'s object).
// Disarms the expectation.
void take_quiet(ReplayScope& scope, ObjectKind kind, bool expected) noexcept;

// The delete callback run the model requires of the attribute (h, engine_key) holding `value`,
// expected of the library while the quiet replay collects (thread_state.hpp: ExpectedRun).
[[gnu::always_inline]] inline void expect_run(Handle h, int engine_key, std::uint64_t value) noexcept {
  ExpectedRun& e = t_state.ctx.expected;
  e.object = h;
  e.value = value;
  e.engine_id = engine_key;
  e.state = kExpectArmed;
}
// Whether the library made that run and nothing else (the quiet replay logged nothing).
[[gnu::always_inline]] inline bool ran_only_expected(const Replay& quiet) noexcept {
  return t_state.ctx.expected.state == kExpectRan && quiet.seen.size() == 0;
}

}  // namespace attrcheck::rt
