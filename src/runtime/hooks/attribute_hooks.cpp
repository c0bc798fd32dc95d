// One hook per op: the checks each call gets, then the mode's behaviour. This file: the shared
// checks and attributes; keyval_hooks.cpp: keyval create and free; object_hooks.cpp: dup,
// constructors, free; lifecycle_hooks.cpp.
//
//   shadow:  checks -> refuse an erroneous call (it never reaches the library) -> forward to the
//            library -> mirror the call in the engine, answering its callbacks with the ones the
//            library ran (Replay) -> compare -> impl.divergence where the standard is clear.
//   emulate: checks -> the engine serves the call and runs the callbacks itself; the library
//            is asked only for predefined attributes and for creating / freeing the objects.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/call_counts.hpp"
#include "runtime/callbacks/run.hpp"
#include "runtime/hooks/hook_common.hpp"
#include "runtime/mpi_profile.hpp"

namespace attrcheck::rt {

// Everything an intercepted call checks first. False: refuse with *rc.
bool enter_slow(const Call& call, int* rc) {
  register_call_counts_once();  // (a thread's first call comes here: kUnchecked)
  if (t_state.ctx.cb_top == &kInFortran && call.api->binding == Binding::C) {
    *rc = kPassThrough;  // the library's Fortran binding calling C: the Fortran wrapper handles it
    return false;
  }
  Runtime& r = state();
  if (r.library_finalizing.load(std::memory_order_acquire) && (!t_state.ctx.cb_top || t_state.ctx.cb_top == &kUnchecked)) {
    *rc = kPassThrough;
    return false;
  }
  switch (phase()) {
    case Phase::BeforeInit:
      // Certain only once the library agrees: MPI may have started where the tool did not see it.
      if (adopt_library_start()) return enter(call, rc);
      report(finding(Rule::LifecycleBeforeInit, call));
      *rc = MPI_ERR_OTHER;
      return false;
    case Phase::Finalized:
      report(finding(Rule::LifecycleAfterFinalize, call));
      *rc = MPI_ERR_OTHER;
      return false;
    default:
      break;
  }
  if (in_teardown_callback()) {
    FindingInput in = finding(Rule::CallbackAfterFinalize, call);
    in.detail = "called from a delete callback that MPI_Finalize runs after it began tearing MPI down";
    report(in);
    *rc = MPI_ERR_OTHER;
    return false;
  }
  if (call.api->replacement) {
    FindingInput in = finding(Rule::DeprecatedCall, call);
    in.replacement = call.api->replacement;
    report(in);
  }
  if (r.thread_level < MPI_THREAD_SERIALIZED && r.first_thread.load(std::memory_order_relaxed) != thread_token()) {
    // Below MPI_THREAD_SERIALIZED only the thread that initialised MPI may call it. The call is
    // erroneous, and the engine takes no lock at this level: it is refused, or for an object's
    // creation, duplication or free passed to the library without being mirrored.
    FindingInput in = finding(Rule::ThreadLevel, call);
    in.detail = r.run.thread_level;
    report(in);
    *rc = call.api->lifecycle ? kPassThrough : MPI_ERR_OTHER;
    return false;
  }
  // MPI_THREAD_MULTIPLE: a second thread calls, on its first call or from a callback of ours the
  // library runs on it; sets are deferred no more, and the first thread's are applied
  // (pending.cpp). (A thread other than the first passes here, not the inline paths, while sets
  // are deferred: it has not passed the check below yet, or a callback's frame is on top. The
  // first thread's sets are not in pending_owner, which settle() reads, at this level.)
  if (g_fast.gate_pending && g_fast.defer_sets.load(std::memory_order_relaxed) &&
      r.first_thread.load(std::memory_order_relaxed) != thread_token())
    settle_elsewhere();
  // For good: the thread level and the first thread never change (see kUnchecked).
  if (t_state.ctx.cb_top == &kUnchecked) t_state.ctx.cb_top = nullptr;
  return true;
}

Result check_object(const Call& call, ObjectKind kind, Handle h, ObjectInfo* info) {
  if (h == null_handle(kind)) return {Status::ObjectNull, 0};
  ObjectInfo local{};
  ObjectInfo* out = info ? info : &local;
  Engine& e = *state().engine;
  if (e.object_info(kind, h, out) || (adopt(kind, h, library_vouches(call)) && e.object_info(kind, h, out))) return {};
  return {Status::ObjectUnknown, 0};
}

namespace {

// Remembers a query found valid at `layout` while MPI runs (nothing remembered outlives the
// layout advance when MPI_Finalize begins); nullptr otherwise.
QueryCache::Entry* remember_query(ObjectKind kind, Binding as, Handle h, int key, int engine_key,
                                  std::uint64_t layout) noexcept {
  if (!g_fast.open.load(std::memory_order_acquire)) return nullptr;
  settle();  // (entries may move)
  return &t_state.queries.remember(kind, as, h, key, engine_key, layout);
}

// What a set or delete would be refused for, before it reaches the library (shadow mode):
// object and keyval checks, predefined keyvals being read-only. A query this thread already found
// valid skips them. *engine_key: the engine's keyval; *present (if given): the attribute is set.
// A valid set also leaves the engine's cursor for it in the query's cache entry (checked_set).
Result check_modify(const Call& call, Handle h, int key, int* engine_key, int* present, bool set = false) {
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  const Binding as = call.api->binding;
  const std::uint64_t layout = layout_stamp();
  void* current = nullptr;
  if (QueryCache::Entry* q = t_state.queries.find(kind, as, h, key, layout)) {
    *engine_key = q->engine_key;
    if (set && !q->cursor.object)
      r.engine->find_set_cursor(kind, h, q->engine_key, layout, &q->cursor, &q->user_delete);
    if (!present) return {};
    // A current answer is the engine's: no need to ask it (a delete after a set: ~130
    // instructions of ~1,900, callgrind).
    if (QueryCache::has_answer(*q, g_fast.version->load(std::memory_order_acquire))) {
      *present = q->flag;
      return {};
    }
    const Result res = r.engine->get_attr(kind, h, q->engine_key, Binding::C, &current, present);
    if (res.ok()) return res;
  }
  *engine_key = to_engine_key(key);
  int found = 0;
  Result res = with_object(call, kind, h, [&] {
    return r.engine->get_attr(kind, h, *engine_key, Binding::C, &current, &found);
  });
  if (res.status == Status::KeyvalFreed && present) {
    // A delete through a key the user freed while attributes still use it is how the standard has
    // those attributes freed; only a key with no attribute left is gone for good.
    res = r.engine->check_delete(kind, h, *engine_key, &found);
    if (res.ok()) {
      *present = found;
      return res;  // (not remembered: the key is not valid for a set or a get)
    }
  }
  if (res.ok() && is_predefined_key(key)) res.status = Status::KeyvalPredefined;
  if (res.ok()) {
    QueryCache::Entry* q = remember_query(kind, as, h, key, *engine_key, layout);
    if (q && set) r.engine->find_set_cursor(kind, h, *engine_key, layout, &q->cursor, &q->user_delete);
  }
  if (present) *present = found;
  return res;
}

// What the library ran during a plain set or delete: nothing, or one delete callback (*seen, and
// the call in *ran). False if it ran anything else.
bool single_delete_seen(const Replay& replay, RanDelete* ran, bool* seen) {
  const std::size_t n = replay.seen.size();
  *seen = n == 1;
  if (n > 1) return false;
  if (n == 1) {
    const Observation& o = *replay.seen.begin();
    if (o.copy) return false;
    *ran = RanDelete{o.object, o.engine_id, o.value_in, o.rc};
  }
  return true;
}

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

}  // namespace

bool refused_unknown(const Call& call, ObjectKind kind, Handle h, int rc) {
  if (rc == MPI_SUCCESS || !adopted_now(kind, h)) return false;
  state().engine->forget_object(kind, h);
  // A handle the tool saw freed, that the library was trusted with and refused: now certain.
  if (t_state.ctx.adopted.was_freed) report_status(call, Status::ObjectUnknown, kind, h, 0, 0);
  return true;
}
bool refused_unknown(const Call& call, ObjectKind kind, Handle h, int rc, ReplayScope& replay) {
  if (rc == MPI_SUCCESS || !adopted_now(kind, h)) return false;
  replay.replay().lenient = true;
  replay.finish();
  return refused_unknown(call, kind, h, rc);
}

int refuse(const Call& call, Result res, ObjectKind kind, Handle h, int user_key, int engine_key) {
  report_status(call, res.status, kind, h, user_key, engine_key);
  return fail(call, kind, h, error_code(res, kind));
}

int reentrant(const Call& call, ObjectKind kind, Handle h) {
  FindingInput in = finding(Rule::CallbackReentrant, call);
  in.has_object = true;
  in.kind = kind;
  in.object = h;
  in.object_name = object_name(kind, h);
  in.detail = "called from inside a copy or delete callback running for this same object";
  report(in);
  return fail(call, kind, h, MPI_ERR_OTHER);
}

int on_null_arg(const Call& call, const char* param, const FnRef<int()>& forward) {
  CallScope scope(call);
  int rc;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward() : rc;
  FindingInput in = finding(Rule::ArgNull, call);
  in.detail = param;
  report(in);
  return fail(call, call.api->kind, 0, MPI_ERR_ARG);
}

// ---- attributes ---------------------------------------------------------------------------------

namespace {
// Shadow mode: mirrors a set the library answered with rc, answering the engine's callbacks with
// the ones the library ran (`replay`).
int mirror_set_replayed(const Call& call, Handle h, int key, int engine_key, std::uint64_t word, Origin origin,
                        int rc, ReplayScope& replay) {
  settle();
  if (rc != MPI_SUCCESS) replay.replay().lenient = true;  // the library stopped somewhere of its own
  const Result res = state().engine->set_attr(call.api->kind, h, engine_key, call.api->binding, word, origin);
  replay.finish();
  if ((rc == MPI_SUCCESS) != res.ok()) result_divergence(call, rc, res, key);
  return rc;
}

// After an emulated set or delete that succeeded through the query's cursor (version: the
// engine's right after it, read under its lock while the cursor's layout still held), the
// query's entry takes the new answer, as a get would read it, so that the next call of the query
// needs no engine read (a delete's presence check: set + delete ~170 instructions). A callback
// that ran (`ran_user_code`: the keyval has a user delete function) may have called MPI on this
// thread, which may have moved the entry or the layout: then only while the entry still holds
// the query (`object`, `query`) at the same layout. A default-INTEGER value (sign-extended) is
// left to the full path.
inline void emulated_answer(QueryCache::Entry& q, bool ran_user_code, Handle object, std::uint64_t query,
                            std::uint64_t version, std::uint64_t word, int flag) noexcept {
  if (ran_user_code && (q.object != object || q.query != query || q.layout() != layout_stamp())) return;
  if (q.binding() == Binding::FortranInt) return;
  QueryCache::remember_answer(q, version, word, flag);
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
// Emulate mode, a set or delete whose delete callback the cache ran itself (with `old`,
// successfully), when what the cache meant to do next no longer holds (the callback called MPI,
// which applied the pending sets or moved the layout; no room for another pending set): the
// engine makes the change without running the callback again (Engine::set_attr_after_delete,
// delete_attr_ran; else the general way, answered from the run).
[[gnu::noinline]] int change_after_callback(const Call& call, const SetCursor& cursor, Handle h, int key,
                                            std::uint64_t old, const std::uint64_t* word) {
  settle();
  Engine& e = *state().engine;
  const ObjectKind kind = call.api->kind;
  const RanDelete ran{h, key, old, MPI_SUCCESS};
  const Origin origin = word ? origin_site(call) : 0;
  if (word ? e.set_attr_after_delete(cursor, Binding::C, *word, origin, ran) : e.delete_attr_ran(cursor, &ran))
    return MPI_SUCCESS;
  ReplayScope replay(call, true);
  replay.replay().seen.push_back(Observation{false, kind, h, key, MPI_SUCCESS, old, 0, 0, false, 0});
  const Result res = word ? e.set_attr(kind, h, key, Binding::C, *word, origin) : e.delete_attr(kind, h, key);
  replay.finish();
  return res.ok() ? MPI_SUCCESS : refuse(call, res, kind, h, key, key);
}

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
// (kGated: at MULTIPLE; one test of the thread level, before the callback: ~7 instructions a
// set + delete less below MULTIPLE than testing it again after, MPICH, callgrind.)
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

// A set replacing a value whose keyval has a user delete function: the old value's callback runs,
// then the set is deferred (its record says the callback ran: fast_path.hpp, PendingSet::replaced).
bool replace_from_cache(const Call& call, QueryCache::Entry& q, Handle h, int key, std::uint64_t word,
                        std::uint64_t version, int* rc) {
  return change_from_cache(call, q, h, key, version, &word, [&](auto share) {
    return record_pending<decltype(share)::value>(q, word, call.caller, true);
  }, rc);
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

bool refresh_answer(QueryCache::Entry& q, std::uint64_t version) noexcept {
  if (pending_elsewhere()) {  // the engine lacks them
    settle_elsewhere();
    version = g_fast.version->load(std::memory_order_acquire);
    if (QueryCache::has_answer(q, version)) return true;
  }
  // The engine lacks the value q must read; or (MPI_THREAD_MULTIPLE) another thread applied them
  // and q's marks are to be cleared first (pending.cpp).
  if (t_state.pending.count && (t_state.pending.applied.load(std::memory_order_relaxed) || t_state.queries.other_pending(q))) {
    apply_pending();
    version = g_fast.version->load(std::memory_order_acquire);
    if (QueryCache::has_answer(q, version)) return true;
  }
  if (q.layout() != layout_stamp()) return false;
  std::uint64_t word = 0;
  int found = 0;
  bool truncated = false;
  const Result res =
      state().engine->get_attr(q.kind(), q.object, q.engine_key, q.binding(), &word, &found, &truncated);
  if (!res.ok() || truncated) return false;
  // (False if `version` was odd: another thread was changing the engine as it was read. The
  // answer read is the engine's, but q does not hold it, and callers answer from q.)
  return QueryCache::remember_answer(q, version, word, found);
}

int get_diverged(const Api* api, const void* caller, const QueryCache::Entry* q, int rc, const void* value_out,
                 const int* flag) noexcept {
  return compare_with_model(Call{api, caller}, q->object, q->key(), q->engine_key, rc, value_out, flag, q->flag,
                            q->word);
}

int compare_with_model(const Call& call, Handle h, int key, int engine_key, int rc, const void* value_out,
                       const int* flag, int model_flag, std::uint64_t model_word) noexcept {
  if (rc != MPI_SUCCESS) {
    result_divergence(call, rc, Result{}, key);
    return rc;
  }
  if (same_answer(call.api->binding, value_out, *flag, model_flag, model_word)) return rc;
  if (*flag && model_flag && call.api->binding == Binding::C && same_fortran_value(call.api->kind, h, engine_key, value_out))
    return rc;
  char d[160];
  Appender a{d, sizeof d};
  a.put(*flag ? "returned flag 1" : "returned flag 0");
  a.put(model_flag ? " where the attribute is set" : " where no attribute is set");
  if (*flag && model_flag) a.put(", with a different value");
  divergence(call, d, true, key);
  return rc;
}

// A get the inline path (runtime/fast_path.hpp) could not answer: queries not yet found valid on
// this thread (unknown objects, refusals), truncation, predefined keys. A valid query is
// remembered, so the next get of it takes the inline path.
int on_get_attr(const Call& call, Handle h, int key, void* value_out, int* flag, const FnRef<int()>& forward) {
  // No CallScope: a get runs no callback that would need to name it.
  int rc;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward() : rc;
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  if (unchecked(kind, &h, &key)) return forward();
  const Binding as = call.api->binding;
  const std::uint64_t layout = layout_stamp();
  const std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  const int engine_key = to_engine_key(key);
  std::uint64_t model = 0;  // the value as the caller reads it (the first value_size bytes)
  int model_flag = 0;
  bool truncated = false;
  t_state.ctx.adopted.set = false;
  const Result res = with_object(call, kind, h, [&] {
    return r.engine->get_attr(kind, h, engine_key, as, &model, &model_flag, &truncated);
  });
  if (!res.ok()) return refuse(call, res, kind, h, key, engine_key);
  if (is_predefined_key(key)) return forward();  // the library supplies predefined values
  if (truncated) {
    FindingInput in = finding(Rule::AttrTruncated, call);
    in.has_keyval = true;
    in.keyval = key;
    report(in);
  } else if (QueryCache::Entry* q = remember_query(kind, as, h, key, engine_key, layout)) {
    QueryCache::remember_answer(*q, version, model, model_flag);
  }
  if (r.mode == Mode::Emulate) return answer(as, model_flag, model, value_out, flag);
  rc = forward();
  if (refused_unknown(call, kind, h, rc)) return rc;  // an object the tool never saw, refused by the library
  return compare_with_model(call, h, key, engine_key, rc, value_out, flag, model_flag, model);
}

namespace {
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
  // The quick ways first, the full hook out of line (its frame costs ~20 instructions a call).
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
  if (in_callback_for(kind, h)) return reentrant(call, kind, h);
  if (unchecked(kind, &h, &key)) return forward();
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

}  // namespace attrcheck::rt
