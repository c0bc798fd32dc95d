// The set hook (MPI_Comm_set_attr and its kin): the checks, then in shadow mode the library's set
// mirrored in the engine, in emulate mode the engine's set; and the out-of-line ends of the quick
// set the generated wrappers make (set_path.hpp): a shadow set not deferred, mirrored
// (mirror_library_set, quiet_*_mirrored), and an emulated set through the query's cursor
// (set_emulated_undeferred).
//
//   shadow:  checks -> refuse an erroneous call (it never reaches the library) -> forward to the
//            library -> mirror the call in the engine, answering its callbacks with the ones the
//            library ran (Replay) -> compare -> impl.divergence where the standard is clear.
//   emulate: checks -> the engine serves the call and runs the callbacks itself; the library
//            is asked only for predefined attributes and for creating / freeing the objects.
#include "runtime/hooks/cache_callbacks.hpp"
#include "runtime/hooks/hook_common.hpp"

namespace attrcheck::rt {

namespace {

// Shadow mode, a set the library performed: when it ran what the standard requires (the old
// value's delete callback, or nothing) and that succeeded, the engine applies the set without
// replaying anything (Engine::set_attr_ran), and the query's cache entry takes the new answer.
// `query`: the entry as it was before the call went to the library, and `slot` where it was
// (callbacks may have reused it since). False: the caller mirrors the set through the replay.
bool mirror_plain_set(ReplayScope& scope, const QueryCache::Entry& query, QueryCache::Entry* slot, Binding as,
                      std::uint64_t word, Origin origin) {
  settle();  // the sets made before this one go first
  RanDelete ran{};
  bool seen = false;
  if (!single_delete_seen(scope.replay(), &ran, &seen)) return false;
  std::uint64_t version = 0;
  if (!state().engine->set_attr_ran(query.cursor, as, word, origin, seen ? &ran : nullptr, &version)) return false;
  t_state.pending.mirrored_at = version;
  scope.dismiss();
  // A get in the same binding reads back the word as set (a default-INTEGER one is sign-extended:
  // that is left to the full path).
  if (as != Binding::FortranInt && slot && slot->object == query.object && slot->query == query.query)
    QueryCache::remember_answer(*slot, version, word, 1);
  return true;
}

// Shadow mode: mirrors a set the library answered with rc, answering the engine's callbacks with
// the ones the library ran (`replay`). The call was checked when it began: the replaced value's
// delete callback, which the library ran meanwhile, may have freed the keyval since, and the
// engine takes the set as it would have then (Engine::set_attr_entered), as the library did.
int mirror_set_replayed(const Call& call, Handle h, int key, int engine_key, std::uint64_t word, Origin origin,
                        int rc, ReplayScope& replay) {
  settle();
  if (rc != MPI_SUCCESS) replay.replay().lenient = true;  // the library stopped somewhere of its own
  const Result res = state().engine->set_attr_entered(call.api->kind, h, engine_key, call.api->binding, word, origin);
  replay.finish();
  if ((rc == MPI_SUCCESS) != res.ok()) result_divergence(call, rc, res, key);
  return rc;
}

// Emulate mode: a set the checks above let through, not taken the quick way (set_emulated): the
// query is remembered with its cursor, so that the next set of it is.
int emulate_set(const Call& call, Handle h, int key, std::uint64_t word, Origin origin) {
  Engine& e = *state().engine;
  const ObjectKind kind = call.api->kind;
  const Binding as = call.api->binding;
  const std::uint64_t layout = layout_stamp();
  const Result res = with_object(call, kind, h, [&] { return e.set_attr(kind, h, key, as, word, origin); });
  if (!res.ok()) return refuse(call, res, kind, h, key, key);
  // Set: the object and keyval were valid (if a callback changed the layout since `layout`, the
  // cursor found is void from the start).
  if (!is_predefined_key(key))
    if (QueryCache::Entry* q = remember_query(kind, as, h, key, key, layout))
      e.find_set_cursor(kind, h, key, layout, &q->cursor, &q->user_delete);
  return MPI_SUCCESS;
}
}  // namespace

int on_set_attr(const Call& call, Handle h, int key, std::uint64_t word, const FnRef<int()>& forward) {
  CallScope scope(call);
  int rc;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward() : rc;
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  if (in_callback_for(kind, h)) return reentrant(call, kind, h);
  if (unchecked(kind, &h, &key)) return forward();
  if (g_constructed_copies.load(std::memory_order_acquire)) forget_constructed_key(kind, h, to_engine_key(key));
  const Origin origin = origin_site(call);
  if (r.mode == Mode::Emulate) return emulate_set(call, h, key, word, origin);
  int engine_key = 0;
  t_state.ctx.adopted.set = false;
  const Result res = check_modify(call, h, key, &engine_key, nullptr, true);
  if (!res.ok()) return refuse(call, res, kind, h, key, engine_key);
  ReplayScope replay(call, false);
  rc = forward();
  if (refused_unknown(call, kind, h, rc, replay)) return rc;
  return mirror_library_set(call, h, key, word, rc, replay);
}

namespace {
// A set replacing a value whose keyval has a user delete function: the old value's callback runs,
// then the set is deferred (its record says the callback ran: PendingSet::replaced).
bool replace_from_cache(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                        std::uint64_t version, int* rc) {
  return change_from_cache(call, q, h, key, version, &word, [&](auto share) {
    return record_pending<decltype(share)::value>(q, word, call.caller, true);
  }, rc);
}

}  // namespace

int set_emulated_undeferred(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                            const FnRef<int()>& forward) {
  if (q.user_delete && callbacks_from_cache(call)) {
    // (An answer out of date is read afresh, as for defer_emulated_set: in a run of replaces each
    // one moved the engine's version until they are all deferred.)
    std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
    if (!QueryCache::has_answer(q, version) && refresh_answer(q, version))
      version = g_fast.version->load(std::memory_order_acquire);
    int rc;
    if (QueryCache::has_answer(q, version)) {
      if (!q.flag) {
        if (defer_emulated_set(call, q, word)) return MPI_SUCCESS;
      } else if (replace_from_cache(call, q, h, key, word, version, &rc)) {
        return rc;
      }
    }
  }
  settle();  // the engine is about to change: the sets made before this one go first
  Engine& e = *state().engine;
  AtOutcome out;
  if (__builtin_expect(!q.user_delete, 1)) {  // no user code runs: nothing to mark or re-check
    if (!e.set_attr_at(q.cursor, call.api->binding, word, origin_site(call), &out))
      return on_set_attr(call, h, key, word, forward);
    if (!out.result.ok()) return refuse(call, out.result, call.api->kind, h, key, key);
    emulated_answer(q, false, 0, 0, out.version, word, 1);
    return MPI_SUCCESS;
  }
  // The replaced value's delete callback may run: the call is marked as the one in progress for
  // it, and the entry re-checked after it.
  const Handle object = q.object;
  const std::uint64_t query = q.query;
  bool done;
  {
    CallScope scope(call);
    done = e.set_attr_at(q.cursor, call.api->binding, word, origin_site(call), &out);
  }
  if (!done) return on_set_attr(call, h, key, word, forward);
  if (!out.result.ok()) return refuse(call, out.result, call.api->kind, h, key, key);
  emulated_answer(q, true, object, query, out.version, word, 1);
  return MPI_SUCCESS;
}

int mirror_library_set(const Call& call, Handle h, int key, std::uint64_t word, int rc, ReplayScope& replay) {
  const Origin origin = origin_site(call);
  const ObjectKind kind = call.api->kind;
  const Binding as = call.api->binding;
  // The query's entry, if callbacks left it (it went to the library valid: the layout decides).
  QueryCache::Entry* slot = t_state.queries.find(kind, as, h, key, layout_stamp());
  if (slot && slot->cursor.object) {
    const QueryCache::Entry query = *slot;  // (mirror_plain_set may move entries as it settles)
    if (rc == MPI_SUCCESS && mirror_plain_set(replay, query, slot, as, word, origin)) return rc;
    return mirror_set_replayed(call, h, key, query.engine_key, word, origin, rc, replay);
  }
  return mirror_set_replayed(call, h, key, to_engine_key(key), word, origin, rc, replay);
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

}  // namespace attrcheck::rt
