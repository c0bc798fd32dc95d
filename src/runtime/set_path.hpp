// The quick way of a set of a query this thread already checked (checked_set in fast_path.hpp),
// inline in the generated set wrappers, and the quick ways of a delete. Part of the runtime's face
// to the generated wrappers (with hooks.hpp, fast_path.hpp and call_counts.hpp): they include it
// by this path. Shadow mode: the call goes to the library, and a set that did exactly what the
// model requires is deferred (fast/pending_sets.hpp, "Deferred sets"); everything else is
// decided by mirror_library_set (hooks/set_hook.cpp). Emulate mode: the engine sets it through
// the query's cursor (set_emulated).
#pragma once

#include "runtime/callbacks/replay.hpp"
#include "runtime/fast/pending.hpp"
#include "runtime/fast/quiet_replay.hpp"
#include "runtime/fast_path.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// Shadow mode: mirrors now a set the library made (and that was not deferred): through
// Engine::set_attr_ran with the query's cursor, else through the replay. (h, key): what was set;
// rc: what the library returned. Also the end of the full hook's set (set_hook.cpp).
int mirror_library_set(const Call& call, Handle h, int key, std::uint64_t word, int rc, ReplayScope& replay);

// Shadow mode: the end of a quick set whose runs the quiet replay collected and that cannot be
// deferred: mirrored with those runs (mirror_library_set), in a call scope of its own. (h, key,
// word): the set; rc: what the library returned. Returns what the call returns.
// quiet_replace_mirrored: the same for a replacing set, which armed an expected run. (Two
// functions, not a seventh argument: on the stack, it cost the set functions a frame pointer.)
int quiet_set_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc);
int quiet_replace_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc);
// The same for a delete that did not cancel a set (delete_not_cancelled), inside the caller's
// call scope.
int quiet_delete_mirrored(const Call& call, Handle h, int key, int engine_key, int rc);

// Defers a set the library made with rc MPI_SUCCESS if it ran exactly the callbacks the model
// requires: the old value's delete callback, with that value, successfully (flag: a value was
// set; user_delete: its keyval has a delete function), or nothing. `q`: the query's entry, whose
// answer was current at `version` before the call went to the library. False: mirror it now.
[[gnu::always_inline]] inline bool defer_set(ReplayScope& scope, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                      const void* site, std::uint64_t version) noexcept {
  // Nothing moved while the library ran (callbacks may call MPI): the entry still holds this
  // query, and its answer is still current.
  if (q.version != version || g_fast.version->load(std::memory_order_acquire) != version || q.object != h ||
      !q.has_key(key))
    return false;
  const Replay& replay = scope.replay();
  const std::size_t n = replay.seen.size();
  const bool replaces = q.flag && q.user_delete;
  if (replaces) {
    if (n != 1) return false;
    if (!ran_as_expected(*replay.seen.begin(), h, q.engine_key, q.word)) return false;
  } else if (n != 0) {
    return false;
  }
  if (!record_pending_here(q, word, site, replaces))
    return false;
  scope.dismiss();
  return true;
}

// Emulate mode, deferred sets. Emulate is the cache: a set that runs no callback (the first set
// of an attribute, or a replace whose keyval has no user delete function) is checked by the
// query's cache entry alone (checked_set: valid at the current layout, no callback of ours
// running, MPI running) and its application to the engine waits, as a shadow set's does
// (pending_sets.hpp, "Deferred sets": the entry holds the answer, every hook's enter() applies the
// pending sets first, and so do the emulate quick ways before they touch the engine). A delete of
// a set that made the attribute then cancels the pair in the cache (delete_emulated). Only where
// the answer (what the set replaces) is known, and in the C binding, as in shadow mode. An answer
// out of date is read afresh (refresh_answer): in a run of sets of several attributes each set
// moved the engine's version until they are all deferred, after which it stays put.
// False: not deferred, nothing done.
[[gnu::always_inline]] inline bool defer_emulated_set(const Call& call, QueryCache::Entry& q,
                                                      std::uint64_t word) noexcept {
  if (!g_fast.defer_sets.load(std::memory_order_relaxed) || call.api->binding != Binding::C) return false;
  const std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  // (With a user delete function only a first set is deferred: not worth a read of the engine.)
  if (!QueryCache::has_answer(q, version) && (q.user_delete || !refresh_answer(q, version))) return false;
  if (q.user_delete && q.flag) return false;
  return record_pending_here(q, word, call.caller, false);
}

// Emulate mode: a set of a query this thread already checked (checked_set): deferred if it may
// be, else set_emulated_undeferred, made through the query's cursor (set_hook.cpp). `forward`: the
// library's set, for the full hook (on_set_attr) when the cursor no longer serves.
int set_emulated_undeferred(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                            const FnRef<int()>& forward);
inline int set_emulated(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                        const FnRef<int()>& forward) {
  if (defer_emulated_set(call, q, word)) return MPI_SUCCESS;
  return set_emulated_undeferred(call, q, h, key, word, forward);
}

// The C set wrappers' first test (gen_wrappers.py): whether a set may be deferred (shadow or
// emulate mode, while sets are; defer_sets is never set with mode=off), and in which mode: 0, or
// kDeferShadow (then the wrapper's `_deferred` part tries set_entry + set_deferred) or
// kDeferEmulate (its `_emulated` part: set_entry + set_deferred_emulated); else its out-of-line
// part decides. No test of the mode beyond defer_sets: t_state.ctx.cb_top == nullptr also says
// that attrcheck is on (cached_query).
inline std::uint8_t deferring_sets() noexcept { return g_fast.defer_sets.load(std::memory_order_relaxed); }

// A shadow set of checked_set's entry `q` once the call is in scope: the library's set, then,
// if the answer (the value the set replaces) was `known` at `version`, the set deferred, else (or
// if it cannot be) mirrored. Returns what the call returns. (set_deferred's and set_cached's
// common end.)
template <typename Forward>
[[gnu::always_inline]] inline int forward_then_defer(const Call& call, QueryCache::Entry& q, Handle h, int key,
                                                     std::uint64_t word, std::uint64_t version, bool known,
                                                     Forward& forward) {
  ReplayScope replay(call, false);
  const int rc = forward();
  if (__builtin_expect(rc == MPI_SUCCESS && known, 1) && defer_set(replay, q, h, key, word, call.caller, version))
    return rc;
  return mirror_library_set(call, h, key, word, rc, replay);
}

// set_deferred's shadow set of a keyval without a user delete function (q.user_delete false): the
// library's set can run no callback of ours (it runs the old value's delete function only, which
// for this keyval is the library's own or none: keyval_hooks.cpp gives the library a trampoline
// only for a user function), so there is nothing to collect and nothing a callback could name: no
// call scope, no replay scope, no rt::Call, on the way to the library and back. (A get, which runs
// no callback either, has never had them.) Deferred as defer_set defers it (nothing ran); otherwise
// mirrored with an empty replay, which is what one would have collected. (The scopes' stores and
// restores, and the registers they kept, were a sizeable part of a set.)
template <typename Forward>
[[gnu::always_inline]] inline int forward_plain_set(const Api& api, const void* caller, QueryCache::Entry& q, Handle h,
                                                    std::uint64_t query, std::uint64_t word, Forward& forward) {
  const int rc = forward();
  // Nothing moved while the library ran, as defer_set checks (no callback of ours ran, but the
  // library might call MPI itself): the entry still holds the query, and its answer is current.
  // (Current now, rather than the version read before the call: the same for the deferral,
  // which needs the engine to hold the answer the entry holds, and one register fewer kept
  // across the library's call; so is the keyval, kept as the entry's tag, `query`.)
  if (__builtin_expect(rc == MPI_SUCCESS, 1) && q.object == h && q.query == query &&
      QueryCache::has_answer(q, g_fast.version->load(std::memory_order_acquire)) &&
      record_pending_here(q, word, caller, false))
    return rc;
  const Call call{&api, caller};
  CallScope scope(call);
  ReplayScope replay(call, false);
  return mirror_library_set(call, h, QueryCache::key_of(query), word, rc, replay);
}

// set_deferred's shadow set of a keyval with a user delete function whose attribute is not set
// (q.flag 0, current): a conforming library runs no callback of ours (a first set deletes
// nothing), so, as forward_plain_set, no call scope and no rt::Call on the way to the library;
// the callbacks it runs all the same (it held a value the model did not know of) are collected
// by the thread's quiet replay (quiet_replay.hpp), one store each way, instead of a ReplayScope's
// Replay built and taken down on the stack. Deferred if nothing ran and nothing moved (as
// forward_plain_set); anything else is mirrored with what ran (quiet_set_mirrored), which
// reports a delete callback the standard does not call here as a ReplayScope's replay did. (The
// one thing such an unexpected callback's run lacks is the call scope while it runs: a finding
// it raises itself, a failure or an exception, names the call "MPI" rather than
// MPI_Comm_set_attr; the divergence names the call.)
template <typename Forward>
[[gnu::always_inline]] inline int forward_first_set(const Api& api, const void* caller, QueryCache::Entry& q, Handle h,
                                                    std::uint64_t query, std::uint64_t word, Replay& quiet,
                                                    Forward& forward) {
  t_state.ctx.replay = &quiet;
  const int rc = forward();
  t_state.ctx.replay = nullptr;
  if (__builtin_expect(rc == MPI_SUCCESS && quiet.seen.size() == 0, 1) && q.object == h && q.query == query &&
      QueryCache::has_answer(q, g_fast.version->load(std::memory_order_acquire)) &&
      record_pending_here(q, word, caller, false))
    return rc;
  return quiet_set_mirrored(api, caller, h, QueryCache::key_of(query), word, rc);
}

// set_deferred's shadow set replacing a value whose keyval has a user delete function: the
// library runs our delete trampoline with the old value, under the call scope (its findings name
// the call); the trampoline marks the run the model requires (expect_run), and the quiet replay
// collects any other. Deferred as defer_set defers it (nothing moved, and the one run is the
// one the model requires); anything else is mirrored with what ran (quiet_replace_mirrored).
template <typename Forward>
[[gnu::always_inline]] inline int forward_replacing_set(const Api& api, const void* caller, QueryCache::Entry& q,
                                                        Handle h, int key, std::uint64_t word, std::uint64_t version,
                                                        Replay& quiet, Forward& forward) {
  const Call call{&api, caller};
  CallScope scope(call);
  expect_run(h, q.engine_key, q.word);
  t_state.ctx.replay = &quiet;
  const int rc = forward();
  t_state.ctx.replay = nullptr;
  if (__builtin_expect(rc == MPI_SUCCESS && ran_only_expected(quiet), 1) && q.version == version &&
      g_fast.version->load(std::memory_order_acquire) == version && q.object == h && q.has_key(key) &&
      record_pending_here(q, word, caller, true))
    return rc;
  return quiet_replace_mirrored(api, caller, h, key, word, rc);
}

// C binding, the quick ways of a set of set_entry's entry `q`, inline in the wrapper's function for
// its mode (gen_wrappers.py: split_set, which picks it by deferring_sets()), with the library
// call by value (no FnRef). False, with nothing done, if the quick way does not serve (then the
// wrapper's out-of-line path decides, which also refreshes an answer out of date: set_cached);
// true: the call was made, and *rc is what it returns.
// `q`: set_entry's, whose layout stamp is not checked yet: in shadow mode a current answer vouches
// for it (every layout change is a version change), emulate mode checks it here.
// Emulate mode: set_emulated, its deferral inline.
template <typename Forward>
[[gnu::always_inline]] inline bool set_deferred_emulated(const Api& api, const void* caller, QueryCache::Entry& q,
                                                         Handle h, int key, std::uint64_t word, Forward forward,
                                                         int* rc) {
  if (q.layout() != layout_stamp()) return false;
  // set_emulated's body, written out: calling it built the library call's FnRef before the
  // deferral test, on every deferred set.
  const Call call{&api, caller};
  if (__builtin_expect(defer_emulated_set(call, q, word), 1)) {
    *rc = MPI_SUCCESS;
  } else {
    *rc = set_emulated_undeferred(call, q, h, key, word, forward);
  }
  return true;
}
// Shadow mode: set_cached's common case, a set whose answer is current.
template <typename Forward>
[[gnu::always_inline]] inline bool set_deferred(const Api& api, const void* caller, QueryCache::Entry& q, Handle h,
                                                int key, std::uint64_t word, Forward forward, int* rc) {
  const std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  if (!QueryCache::has_answer(q, version)) return false;
  if (__builtin_expect(!q.user_delete, 1)) {
    *rc = forward_plain_set(api, caller, q, h, QueryCache::tag(api.kind, api.binding, key), word, forward);
    return true;
  }
  // (The quiet replay is made by the thread's first out-of-line shadow set, set_cached; a
  // replay already collecting is a call's the library makes inside another: both rare, and
  // both taken out of line.)
  Replay* const quiet = t_state.ctx.quiet;
  if (__builtin_expect(!quiet || t_state.ctx.replay, 0)) return false;
  if (!q.flag) {
    *rc = forward_first_set(api, caller, q, h, QueryCache::tag(api.kind, api.binding, key), word, *quiet, forward);
    return true;
  }
  *rc = forward_replacing_set(api, caller, q, h, key, word, version, *quiet, forward);
  return true;
}

// The cached query a delete may take a quick way with (delete_cached), or nullptr (then call the
// full hook, on_delete_attr): as checked_set. In shadow mode only a delete that cancels a set this
// thread deferred is quick, so there the test starts with whether any set is pending; and the usual
// such delete is of the set deferred last (a set + delete pair), whose entry the last pending
// record names: taken from there if it holds this query, without the cache lookup (hash, two ways).
// That is the entry the lookup finds (a query has one entry in the cache), and one that holds a
// pending set has its cursor; the one test of checked_set's left out, the layout stamp, is
// delete_cancels_set's first (a current answer: every layout change is a version change).
// shadow_delete_entry: checked_delete's shadow half (the C delete wrappers test the mode once,
// themselves, where the wrapper's test and checked_delete's were two).
inline QueryCache::Entry* shadow_delete_entry(const Api& api, Handle h, int key) noexcept {
  const int n = t_state.pending.count;
  if (__builtin_expect(n == 0, 1)) return nullptr;
  QueryCache::Entry* const last = t_state.pending.sets[n - 1].entry;
  if (__builtin_expect(!api.replacement && !t_state.ctx.cb_top && QueryCache::holds(*last, api.kind, api.binding, h, key), 1))
    return last;
  return checked_set(api, h, key);
}
inline QueryCache::Entry* checked_delete(const Api& api, Handle h, int key) noexcept {
  return g_shadow ? shadow_delete_entry(api, h, key) : checked_set(api, h, key);
}

// The quick ways of a delete of checked_delete's entry `q` for (h, key): shadow mode, the delete
// that cancels a deferred set (below); emulate mode, through the query's cursor (delete_hook.cpp).
// False, with nothing done, if the call is not such a delete: then the full hook decides. True:
// *rc is what the call returns.
bool delete_emulated(const Call& call, QueryCache::Entry& q, Handle h, int key, int* rc);

// The end of a delete the library made that did not cancel a set (delete_hook.cpp): the sets
// pending are applied, then the delete is mirrored the usual way. Returns what the call returns.
int delete_not_cancelled(const Call& call, Handle h, int key, int engine_key, int rc, ReplayScope& replay);

// Shadow mode, the delete of an attribute whose set this thread deferred (pending_sets.hpp,
// "Deferred sets") and that no attribute preceded: the pair cancels out. The engine still holds the
// state before the set (no attribute), so once the library has deleted the value running what the
// standard requires (the set value's delete callback, successfully, or nothing), the pending set is
// dropped and the engine is left alone: no set applied, no delete mirrored. The checks the full
// hook would make hold: the query was found valid at the current layout (while MPI runs:
// g_fast.open), and its current answer (the pending set's) says the attribute is present. Called
// before enter(), which would apply the set. Inline in the C delete wrappers, with the library call
// by value (gen_wrappers.py: split_delete); the full hook passes its FnRef. False, with nothing
// done, if the call is not such a delete; true: the call was made, and *rc is what it returns
// (anything unexpected is mirrored the usual way).
template <typename Forward>
[[gnu::always_inline]] inline bool delete_cancels_set(const Call& call, QueryCache::Entry& q, Handle h, int key,
                                                      Forward&& forward, int* rc) {
  // (No test of Runtime::limited, as for sets: a query found valid was checked, and every keyval
  // or object left unchecked past a capacity came after a layout change.)
  if (!g_fast.open.load(std::memory_order_acquire)) return false;
  const std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  const std::uint8_t pending = q.pending;
  if (!pending || !QueryCache::has_answer(q, version) || !t_state.pending.sets[pending - 1].inserted) return false;
  const int engine_key = q.engine_key;
  t_state.ctx.adopted.set = false;
  if (__builtin_expect(!q.user_delete, 1)) {
    // No callback of ours can run (as for forward_plain_set): no scopes on the way to the library.
    *rc = forward();
    if (__builtin_expect(*rc == MPI_SUCCESS && q.pending == pending && q.object == h && q.has_key(key) &&
                             g_fast.version->load(std::memory_order_acquire) == version, 1) &&
        cancel_pending_here(q, pending))
      return true;
    CallScope scope(call);
    ReplayScope replay(call, false);
    *rc = delete_not_cancelled(call, h, key, engine_key, *rc, replay);
    return true;
  }
  // The library runs the set value's delete callback: collected by the quiet replay, as for a
  // replacing set (set_deferred). (None yet, or a replay already collecting: the full hook.)
  Replay* const quiet = t_state.ctx.quiet;
  if (__builtin_expect(!quiet || t_state.ctx.replay, 0)) return false;
  CallScope scope(call);
  expect_run(h, engine_key, q.word);
  t_state.ctx.replay = quiet;
  *rc = forward();
  t_state.ctx.replay = nullptr;
  // Nothing moved while the library ran (its callback may call MPI, which applies the set), and
  // the library ran the set value's delete callback, successfully, and nothing else.
  if (__builtin_expect(*rc == MPI_SUCCESS && ran_only_expected(*quiet), 1) && q.pending == pending && q.object == h &&
      q.has_key(key) && g_fast.version->load(std::memory_order_acquire) == version &&
      cancel_pending_here(q, pending))
    return true;
  *rc = quiet_delete_mirrored(call, h, key, engine_key, *rc);
  return true;
}

// `q`: checked_set's entry for (h, key).
template <typename Forward>
inline int set_cached(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                      Forward&& forward) {
  if (!g_shadow) return set_emulated(call, q, h, key, word, forward);
  if (__builtin_expect(!t_state.ctx.quiet, 0)) install_quiet_replay();  // for set_deferred from now on
  CallScope scope(call);
  // Deferred only where the answer, the value the set replaces, is known now.
  std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  bool known = false;
  if (call.api->binding == Binding::C && g_fast.defer_sets.load(std::memory_order_relaxed)) {
    if (!QueryCache::has_answer(q, version) && version == t_state.pending.mirrored_at && refresh_answer(q, version))
      version = g_fast.version->load(std::memory_order_acquire);  // (refresh_answer may settle)
    known = QueryCache::has_answer(q, version);
  }
  return forward_then_defer(call, q, h, key, word, version, known, forward);
}

}  // namespace attrcheck::rt
