// Emulate mode: the cache runs a keyval's user delete callback itself, for a set replacing a
// value (set_hook.cpp) or the delete of a deferred first set (delete_hook.cpp), and then makes
// the change in the cache, or, where that no longer holds, through the engine. Not a public
// header.
#pragma once

#include <type_traits>

#include "runtime/callbacks/run.hpp"
#include "runtime/hooks/hook_common.hpp"

namespace attrcheck::rt {

// Emulate mode: whether the cache may run a user delete callback itself (set_emulated,
// delete_emulated), without the engine: while sets are deferred, in the C binding. (At
// MPI_THREAD_MULTIPLE the change is announced first: CacheChange, below.)
inline bool callbacks_from_cache(const Call& call) noexcept {
  return g_fast.defer_sets.load(std::memory_order_relaxed) && call.api->binding == Binding::C;
}

// Emulate mode, a set or delete whose delete callback the cache ran itself (with `old`,
// successfully), when what the cache meant to do next no longer holds (the callback called MPI,
// which applied the pending sets or moved the layout; no room for another pending set): the
// engine makes the change without running the callback again (Engine::set_attr_after_delete,
// delete_attr_ran; else the general way, answered from the run).
int change_after_callback(const Call& call, const SetCursor& cursor, Handle h, int key,
                                            std::uint64_t old, const std::uint64_t* word);

// Emulate mode: runs the user delete callback `fn` (extra state `extra`) on q's current value
// from the cache (the set replacing it, or the delete of a deferred first set), marked as
// `call`'s. Returns what it returned; a failure fails the call, and the attribute stays: *rc then
// says so.
inline int run_cached_delete(const Call& call, const QueryCache::Entry& q, Handle h, int key, void* fn,
                             std::uint64_t extra, int* rc) {
  int cb;
  {
    CallScope scope(call);
    cb = run_c_delete(call.api->kind, fn, h, key, q.word, extra);
  }
  if (__builtin_expect(cb != MPI_SUCCESS, 0)) *rc = refuse(call, Result{Status::CallbackFailed, cb}, call.api->kind, h, key, key);
  return cb;
}

// Emulate mode: the cache runs the user delete callback of q's keyval on q's current value (its
// answer current at `version`), then makes the change itself with `finish` (defers the replacing
// set, or cancels the pending pair; called with the Sharing to make it at) if nothing moved while
// the callback ran: any MPI call it made would have applied the pending sets or moved the
// engine's version. Else the engine makes the change without running the callback again
// (change_after_callback; `word`: the set's value, or nullptr for a delete). At
// MPI_THREAD_MULTIPLE the change is announced first (set_path.hpp, CacheChange). False: not a C
// callback, or deferral ended (MULTIPLE), nothing done; else *rc is what the call returns.
// (kGated: at MULTIPLE; the thread level tested once, before the callback, rather than again
// after it.)
template <bool kGated, typename Finish>
[[gnu::always_inline]] inline bool change_from_cache_at(const Call& call, QueryCache::Entry& q, Handle h, int key,
                                                        std::uint64_t version, const std::uint64_t* word,
                                                        Finish& finish, int* rc) {
  void* fn;
  std::uint64_t extra;
  if (!state().engine->c_delete_function(q.cursor, &fn, &extra)) return false;
  const ObjectKind kind = call.api->kind;
  if (kGated && !announce_cache_change(kind, h)) return false;
  const SetCursor cursor = q.cursor;
  const std::uint64_t old = q.word, query = q.query;
  const std::uint8_t pending = q.pending;
  if (run_cached_delete(call, q, h, key, fn, extra, rc) == MPI_SUCCESS) {
    if (__builtin_expect(q.object == h && q.query == query && q.pending == pending && q.version == version &&
                             g_fast.version->load(std::memory_order_acquire) == version, 1)) {
      bool done;
      if constexpr (kGated) done = finish_cache_change(finish);
      else if (g_fast.share_pending) done = finish(std::integral_constant<Sharing, Sharing::kSerialized>{});
      else done = finish(std::integral_constant<Sharing, Sharing::kOwn>{});
      if (done) {
        *rc = MPI_SUCCESS;
        return true;
      }
    }
    *rc = change_after_callback(call, cursor, h, key, old, word);
  }
  if (kGated) end_cache_change(kind, h);
  return true;
}
template <typename Finish>
[[gnu::always_inline]] inline bool change_from_cache(const Call& call, QueryCache::Entry& q, Handle h, int key,
                                                     std::uint64_t version, const std::uint64_t* word, Finish&& finish,
                                                     int* rc) {
  if (g_fast.gate_pending) return change_from_cache_at<true>(call, q, h, key, version, word, finish, rc);
  return change_from_cache_at<false>(call, q, h, key, version, word, finish, rc);
}

}  // namespace attrcheck::rt
