// The checks every hook shares (hook_common.hpp): what an intercepted call checks first
// (enter_slow), whether an object is live, what a set or delete would be refused for, and how a
// refused call is reported.
#include "runtime/process/call_counts.hpp"
#include "runtime/hooks/hook_common.hpp"
#include "runtime/process/chain.hpp"

namespace attrcheck::rt {

// Everything an intercepted call checks first. False: refuse with *rc.
bool enter_slow(const Call& call, int* rc) {
  register_call_counts_once();  // (a thread's first call comes here: kUnchecked)
  if (t_state.ctx.cb_top == &kInFortran && call.api->binding == Binding::C) {
    *rc = kPassThrough;  // the library's Fortran binding calling C: the Fortran wrapper handles it
    return false;
  }
  if (rechained()) {
    *rc = kPassThrough;  // a call attrcheck passed on, sent back: forward() gives it to the library
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
    // The MPI standard ABI leaves them out (its mpi.h has nothing deprecated in MPI-3.1 or before),
    // and a library's libmpi_abi may lack them: the call exists here, since it was made.
    if (call.api->binding == Binding::C) {
      char lacking[200], exists[96];
      Appender l{lacking, sizeof lacking}, e{exists, sizeof exists};
      l.put(call.api->name);
      l.put(" is missing from the library's MPI standard ABI library (libmpi_abi.so.1): a program built for the "
            "standard ABI that calls it does not link there");
      e.put(call.api->name);
      e.put(" exists");
      depended_on(Question::Mpi1Calls, finding(Rule::Count, call), false, lacking, exists);
    }
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
Result check_modify(const Call& call, Handle h, int key, int* engine_key, int* present, bool set) {
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
    // A current answer is the engine's: no need to ask it (a delete after a set).
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

}  // namespace attrcheck::rt
