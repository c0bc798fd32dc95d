// The delete hook (MPI_Comm_delete_attr and its kin): the quick ways first (shadow mode: the
// delete that cancels a deferred set, set_path.hpp; emulate mode: through the query's cursor, or
// the cancelled pair in the cache), then the checks and the mode's delete; and the out-of-line
// end of a quick delete that did not cancel a set (delete_not_cancelled, quiet_delete_mirrored).
#include "runtime/hooks/cache_callbacks.hpp"
#include "runtime/hooks/hook_common.hpp"

namespace attrcheck::rt {

namespace {

// Shadow mode, a delete the library performed with MPI_SUCCESS, of a query this thread found
// valid for a set (its entry holds the engine's cursor): when the library ran what the standard
// requires (the value's delete callback, successfully, or nothing), the engine removes the
// attribute without looking up the object and keyval again or replaying the callback
// (Engine::delete_attr_ran), and the entry's answer becomes "absent". False: the caller mirrors
// the delete through the replay.
bool mirror_plain_delete(ReplayScope& scope, const Call& call, Handle h, int key) {
  settle();
  QueryCache::Entry* q = t_state.queries.find(call.api->kind, call.api->binding, h, key, layout_stamp());
  if (!q || !q->cursor.object) return false;
  RanDelete ran{};
  bool seen = false;
  if (!single_delete_seen(scope.replay(), &ran, &seen)) return false;
  std::uint64_t version = 0;
  if (!state().engine->delete_attr_ran(q->cursor, seen ? &ran : nullptr, &version)) return false;
  scope.dismiss();
  QueryCache::remember_answer(*q, version, 0, 0);
  return true;
}

// Shadow mode: mirrors a delete the library answered with rc (`replay`: the callbacks it ran).
int mirror_library_delete(const Call& call, Handle h, int key, int engine_key, int rc, ReplayScope& replay) {
  const ObjectKind kind = call.api->kind;
  if (rc != MPI_SUCCESS) replay.replay().lenient = true;
  if (refused_unknown(call, kind, h, rc, replay)) return rc;
  if (rc == MPI_SUCCESS && mirror_plain_delete(replay, call, h, key)) return rc;
  const Result res = state().engine->delete_attr(kind, h, engine_key);
  replay.finish();
  if ((rc == MPI_SUCCESS) != res.ok()) result_divergence(call, rc, res, key);
  return rc;
}

// Emulate mode: a delete the checks let through, of an attribute that is set. Through the
// query's cursor when its entry holds one (Engine::delete_attr_at), else through delete_attr.
int emulate_delete(const Call& call, Handle h, int key, int engine_key) {
  Engine& e = *state().engine;
  const ObjectKind kind = call.api->kind;
  if (QueryCache::Entry* q = t_state.queries.find(kind, call.api->binding, h, key, layout_stamp()); q && q->cursor.object) {
    const std::uint64_t object = q->object, query = q->query;
    AtOutcome out;
    if (e.delete_attr_at(q->cursor, &out)) {
      if (!out.result.ok()) return refuse(call, out.result, kind, h, key, engine_key);
      emulated_answer(*q, true, object, query, out.version, 0, 0);
      return MPI_SUCCESS;
    }
  }
  const Result res = e.delete_attr(kind, h, engine_key);
  return res.ok() ? MPI_SUCCESS : refuse(call, res, kind, h, key, engine_key);
}

// The delete of a deferred first set (record `pending` - 1) whose keyval has a user delete
// function: the callback runs on the pending value, then the pair cancels out (the engine never
// had the attribute).
bool delete_from_cache(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint8_t pending,
                       std::uint64_t version, int* rc) {
  return change_from_cache(call, q, h, key, version, nullptr, [&](auto share) {
    return cancel_pending<decltype(share)::value>(q, pending);
  }, rc);
}
}  // namespace

int delete_not_cancelled(const Call& call, Handle h, int key, int engine_key, int rc, ReplayScope& replay) {
  settle();
  return mirror_library_delete(call, h, key, engine_key, rc, replay);
}

// Emulate mode, the quick way: the delete of a query this thread already checked (as checked_set)
// whose current answer says the attribute is set, made through the query's cursor. False, with
// nothing done, if the call is not such a delete or the cursor no longer serves: then the full
// hook decides. True: *rc is what the call returns.
namespace {
bool delete_through_engine(const Call& call, QueryCache::Entry& entry, Handle h, int key, int* rc);
}  // namespace

bool delete_emulated(const Call& call, QueryCache::Entry& entry, Handle h, int key, int* rc) {
  if (const std::uint8_t pending = entry.pending) {
    // The delete of a deferred set that made the attribute: the pair cancels out in the cache
    // (the engine never had the attribute), after the cache ran the keyval's user delete function.
    const std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
    if (t_state.pending.sets[pending - 1].inserted && QueryCache::has_answer(entry, version)) {
      if (!entry.user_delete) {
        if (cancel_pending_here(entry, pending)) {
          *rc = MPI_SUCCESS;
          return true;
        }
      } else if (callbacks_from_cache(call) && delete_from_cache(call, entry, h, key, pending, version, rc)) {
        return true;
      }
    }
  }
  return delete_through_engine(call, entry, h, key, rc);
}

namespace {
// delete_emulated through the query's cursor (Engine::delete_attr_at). (Out of line: the
// cancelling of a deferred set keeps a small frame.)
[[gnu::noinline]] bool delete_through_engine(const Call& call, QueryCache::Entry& entry, Handle h, int key, int* rc) {
  settle();  // the engine is about to be read: the pending sets go first
  QueryCache::Entry* const q = &entry;
  if (!q->flag || !QueryCache::has_answer(*q, g_fast.version->load(std::memory_order_acquire))) return false;
  const Handle object = q->object;
  const std::uint64_t query = q->query;
  const bool user_delete = q->user_delete;
  AtOutcome out;
  // (Marked as the call in progress only where a callback may run, as in set_emulated.)
  const Call* const outer = t_state.ctx.call;
  if (user_delete) t_state.ctx.call = &call;
  const bool done = state().engine->delete_attr_at(q->cursor, &out);
  t_state.ctx.call = outer;
  if (!done) return false;
  *rc = out.result.ok() ? MPI_SUCCESS : refuse(call, out.result, call.api->kind, h, key, key);
  if (out.result.ok()) emulated_answer(*q, user_delete, object, query, out.version, 0, 0);
  return true;
}
}  // namespace

namespace {
int delete_attr_full(const Call& call, Handle h, int key, const FnRef<int()>& forward);
}  // namespace

int on_delete_attr(const Call& call, Handle h, int key, const FnRef<int()>& forward) {
  // The quick ways first, the full hook out of line (its frame would be set up on every call).
  int rc;
  if (QueryCache::Entry* q = checked_delete(*call.api, h, key))
    if (g_shadow ? delete_cancels_set(call, *q, h, key, forward, &rc) : delete_emulated(call, *q, h, key, &rc))
      return rc;
  return delete_attr_full(call, h, key, forward);
}

namespace {
[[gnu::noinline]] int delete_attr_full(const Call& call, Handle h, int key, const FnRef<int()>& forward) {
  int rc;
  CallScope scope(call);
  if (!enter(call, &rc)) return rc == kPassThrough ? forward() : rc;
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  if (in_callback_for(kind, h)) {
    if (kind == ObjectKind::Comm && in_free_callback_for(kind, h)) {
      // What MPI_Comm_free does without attrcheck, which refuses this delete, differs between
      // libraries (mpi_profile.def: delete-attribute-in-free-callback).
      const char* here = library_error_class("delete-attribute-in-free-callback");
      FindingInput in = finding(Rule::Count, call);
      in.has_keyval = true;
      in.keyval = key;
      in.has_object = true;
      in.kind = kind;
      in.object = h;
      in.object_name = object_name(kind, h);
      depended_on_class(Question::DeleteInFreeCallback, in,
                        "a delete callback of MPI_Comm_free deletes another attribute of the communicator (attrcheck "
                        "refuses it); without attrcheck, ",
                        here ? here : "unprobed", "MPI_Comm_free");
    }
    return reentrant(call, kind, h);
  }
  if (unchecked(kind, &h, &key)) return forward();
  if (g_constructed_copies.load(std::memory_order_acquire)) forget_constructed_key(kind, h, to_engine_key(key));
  int engine_key = 0, present = 0;
  t_state.ctx.adopted.set = false;
  Result res = check_modify(call, h, key, &engine_key, &present);
  if (!res.ok()) return refuse(call, res, kind, h, key, engine_key);
  if (!present) {  // not an error by the standard, but not portable
    report_status(call, Status::AttrAbsent, kind, h, key, engine_key);
    return r.mode == Mode::Emulate ? MPI_SUCCESS : forward();
  }
  if (r.mode == Mode::Emulate) return emulate_delete(call, h, key, engine_key);
  ReplayScope replay(call, false);
  rc = forward();
  return mirror_library_delete(call, h, key, engine_key, rc, replay);
}
}  // namespace

int quiet_delete_mirrored(const Call& call, Handle h, int key, int engine_key, int rc) {
  ReplayScope replay(call, false);
  take_quiet(replay, call.api->kind, true);
  return delete_not_cancelled(call, h, key, engine_key, rc, replay);
}

}  // namespace attrcheck::rt
