// The quick way of a set of a query this thread already checked (checked_set in fast_path.hpp),
// inline in the generated set wrappers. Shadow mode: the call goes to the library, and a set
// that did exactly what the model requires is deferred (fast_path.hpp, "Deferred sets");
// everything else is decided by mirror_library_set (hooks.cpp). Emulate mode: the engine sets it
// through the query's cursor (set_emulated).
#pragma once

#include "runtime/runtime.hpp"

namespace attrcheck::rt {

// Shadow mode: mirrors now a set the library made (and that was not deferred): through
// Engine::set_attr_ran with the query's cursor, else through the replay. (h, key): what was set;
// rc: what the library returned. Also the end of the full hook's set (hooks.cpp).
int mirror_library_set(const Call& call, Handle h, int key, std::uint64_t word, int rc, ReplayScope& replay);

// defer_set's record of the set in t_pending (kShared: as for claim_pending). False: not deferred.
template <bool kShared>
[[gnu::always_inline]] inline bool record_pending(QueryCache::Entry& q, std::uint64_t word, const void* site,
                                                  bool replaces) noexcept {
  OwnerGate<kShared> gate;
  if (!gate.open()) return false;
  PendingSets& p = t_pending;
  if (!q.pending) {
    if (p.count == PendingSets::kMax || (p.count == 0 && !claim_pending<kShared>())) return false;
    p.sets[p.count] = PendingSet{&q, q.word, 0, nullptr, replaces, q.flag == 0};
    q.pending = static_cast<std::uint8_t>(++p.count);
    t_queries.drop_other_answers(q);
  }
  PendingSet& ps = p.sets[q.pending - 1];
  ps.stamp = ++p.clock;
  ps.site = site;
  q.word = word;
  q.flag = 1;
  return true;
}

// Defers a set the library made with rc MPI_SUCCESS if it ran exactly the callbacks the model
// requires: the old value's delete callback, with that value, successfully (flag: a value was
// set; user_delete: its keyval has a delete function), or nothing. `q`: the query's entry, whose
// answer was current at `version` before the call went to the library. False: mirror it now.
[[gnu::always_inline]] inline bool defer_set(ReplayScope& scope, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                      const void* site, std::uint64_t version) noexcept {
  // Nothing moved while the library ran (callbacks may call MPI): the entry still holds this
  // query, and its answer is still current.
  if (q.version != version || g_fast.version->load(std::memory_order_acquire) != version || q.object != h ||
      q.key() != key)
    return false;
  const Replay& replay = scope.replay();
  const std::size_t n = replay.seen.size();
  const bool replaces = q.flag && q.user_delete;
  if (replaces) {
    if (n != 1) return false;
    const Observation& o = *replay.seen.begin();
    if (o.copy || o.rc != MPI_SUCCESS || o.object != h || o.engine_id != q.engine_key || o.value_in != q.word)
      return false;
  } else if (n != 0) {
    return false;
  }
  if (!(g_fast.share_pending ? record_pending<true>(q, word, site, replaces)
                             : record_pending<false>(q, word, site, replaces)))
    return false;
  scope.dismiss();
  return true;
}

// Emulate mode: a set of a query this thread already checked (checked_set), made through the
// query's cursor (hooks.cpp). `forward`: the library's set, for the full hook (on_set_attr) when
// the cursor no longer serves.
int set_emulated(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                 const FnRef<int()>& forward);

// The cached query a delete may take a quick way with (delete_cached), or nullptr (then call
// the full hook, on_delete_attr): as checked_set. In shadow mode only a delete that cancels a
// set this thread deferred is quick, so there the test starts with whether any set is pending.
inline QueryCache::Entry* checked_delete(const Api& api, Handle h, int key) noexcept {
  if (g_shadow && __builtin_expect(t_pending.count == 0, 1)) return nullptr;
  return checked_set(api, h, key);
}

// The quick ways of a delete of checked_delete's entry `q` for (h, key) (hooks.cpp): shadow
// mode, the delete that cancels a deferred set; emulate mode, through the query's cursor. False,
// with nothing done, if the call is not such a delete: then the full hook decides. True: *rc is
// what the call returns.
bool delete_cancels_set(const Call& call, QueryCache::Entry& q, Handle h, int key, const FnRef<int()>& forward,
                        int* rc);
bool delete_emulated(const Call& call, QueryCache::Entry& q, Handle h, int key, int* rc);

// `q`: checked_set's entry for (h, key).
template <typename Forward>
inline int set_cached(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                      Forward&& forward) {
  if (!g_shadow) return set_emulated(call, q, h, key, word, forward);
  CallScope scope(call);
  // Deferred only where the answer, the value the set replaces, is known now.
  std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  bool known = false;
  if (call.api->binding == Binding::C && g_fast.defer_sets.load(std::memory_order_relaxed)) {
    if (!QueryCache::has_answer(q, version) && version == t_pending.mirrored_at && refresh_answer(q, version))
      version = g_fast.version->load(std::memory_order_acquire);  // (refresh_answer may settle)
    known = QueryCache::has_answer(q, version);
  }
  ReplayScope replay(call, false);
  const int rc = forward();
  if (__builtin_expect(rc == MPI_SUCCESS && known, 1) && defer_set(replay, q, h, key, word, call.caller, version))
    return rc;
  return mirror_library_set(call, h, key, word, rc, replay);
}

}  // namespace attrcheck::rt
