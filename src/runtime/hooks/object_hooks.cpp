// The object hooks: dup, constructors, calls that hand out handles, free. The checks they share
// with the other hooks are in hook_common.hpp.
#include <dlfcn.h>

#include <vector>

#include "runtime/hooks/hook_common.hpp"
#include "runtime/hooks/window_base.hpp"
#include "runtime/process/frees_under_way.hpp"

namespace attrcheck::rt {

namespace {
// Registers a handle the library just created; a stale registration of the same handle (freed
// on a path the tool does not see) is dropped first.
void register_new(ObjectKind kind, Handle h, Origin origin) {
  if (h == null_handle(kind)) return;
  wait_for_free_of(h);
  note_created(kind, h);
  Engine& e = *state().engine;
  Status s = e.create_object(kind, h, kObjectNone, origin).status;
  if (s == Status::ObjectExists) {
    e.forget_object(kind, h);
    s = e.create_object(kind, h, kObjectNone, origin).status;
  }
  if (s == Status::CapacityExhausted) object_limit();
}

// The thread's RunLog (replay.hpp), claimed by a dup or free for the callbacks the library runs
// for its object; released (and emptied) when the hook returns. Busy (a dup or free inside a
// callback of another): this one collects Observations only.
thread_local RunLog t_run_log;

class LogRuns {
 public:
  LogRuns(ReplayScope& replay, ObjectKind kind, Handle object, bool copy) noexcept {
    RunLog& log = t_run_log;
    if (log.busy) return;
    log.busy = true;
    log.kind = kind;
    log.copies_of = copy ? object : RunLog::kNone;
    log.deletes_of = copy ? RunLog::kNone : object;
    log.odd_flag = false;
    log_ = &log;
    replay.replay().log = log_;
  }
  ~LogRuns() {
    if (!log_) return;
    log_->copies.clear();
    log_->deletes.clear();
    log_->busy = false;
  }
  LogRuns(const LogRuns&) = delete;
  LogRuns& operator=(const LogRuns&) = delete;

 private:
  RunLog* log_ = nullptr;
};

// The engine's mirror of a dup or free the library made, when the callbacks the library ran were
// all for that object (Engine::dup_object_ran / free_object_ran take the plain case from them in
// one pass, without replaying them one by one): the log's runs, and any Observations (a Fortran
// callback's, or all of them when the log was busy) converted to its terms. True: mirrored, and
// every callback seen is accounted for; false: nothing changed (mirror through the replay, after
// ReplayScope::unlog).
bool dup_ran(ObjectKind kind, Handle old, Handle fresh, Replay& replay, Origin origin) {
  RunLog* const log = replay.log;
  if (!log) return false;
  RunList<RanCopy>& ran = log->copies;
  const std::size_t logged = ran.size();
  for (const Observation& o : replay.seen) {
    if (!o.copy || o.kind != kind || o.object != old) {
      ran.shrink_to(logged);
      return false;
    }
    ran.push_back(RanCopy{o.engine_id, o.rc, o.flag, o.value_in, o.value_out});
  }
  if (state().engine->dup_object_ran(kind, old, fresh, ran.data(), ran.size(), origin)) return true;
  ran.shrink_to(logged);
  return false;
}

bool free_ran(ObjectKind kind, Handle h, Replay& replay) {
  RunLog* const log = replay.log;
  if (!log || replay.has_ordered_object) return false;
  RunList<RanDelete>& ran = log->deletes;
  const std::size_t logged = ran.size();
  for (const Observation& o : replay.seen) {
    if (o.copy || o.kind != kind || o.object != h) {
      ran.shrink_to(logged);
      return false;
    }
    ran.push_back(RanDelete{o.object, o.engine_id, o.value_in, o.rc});
  }
  if (state().engine->free_object_ran(kind, h, ran.data(), ran.size())) return true;
  ran.shrink_to(logged);
  return false;
}

// A copy callback's run whose *flag was neither 0 nor 1: the flag (and value) the library acted on.
void odd_flag_as_library(ObjectKind kind, Handle fresh, int engine_id, int rc, int* flag, std::uint64_t* value_out) {
  if (rc != MPI_SUCCESS || *flag == 0 || *flag == 1) return;
  const KeyRecord* rec = record_for(engine_id);
  *flag = rec && library_attr(kind, fresh, rec->user_id, value_out, rec->lang) ? 1 : 0;
}

// A handle the library will never hand out, for mirroring a dup the library refused.
Handle scratch_handle() {
  static std::atomic<std::uint64_t> next{1};
  return 0xA77C000000000000ULL | next.fetch_add(1);
}
}  // namespace

int on_dup(const Call& call, Handle old, const FnRef<int(Handle*)>& forward, const FnRef<void()>& undo) {
  CallScope scope(call);
  int rc;
  Handle fresh = 0;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward(&fresh) : rc;
  Runtime& r = state();
  Engine& e = *r.engine;
  const ObjectKind kind = call.api->kind;
  if (unchecked(kind, &old, nullptr)) return forward(&fresh);
  t_state.ctx.adopted.set = false;
  const Result check = check_object(call, kind, old);
  if (!check.ok()) return refuse(call, check, kind, old, 0, 0);
  if (r.mode == Mode::Emulate) {
    rc = forward(&fresh);
    if (rc != MPI_SUCCESS) return rc;
    note_created(kind, fresh);
    e.forget_object(kind, fresh);  // a stale registration of a reused handle, if any
    const Result res = e.dup_object(kind, old, fresh, origin_site(call));
    if (res.ok()) return MPI_SUCCESS;
    if (res.status == Status::CapacityExhausted) {
      // The engine cannot hold the copy: the library's dup has to serve it, attributes included,
      // which it cannot for emulated keyvals. Say so once; the new object goes unchecked.
      object_limit();
      return MPI_SUCCESS;
    }
    undo();
    return refuse(call, res, kind, old, 0, 0);
  }
  ReplayScope replay(call, false);
  LogRuns log(replay, kind, old, true);
  rc = forward(&fresh);
  Result res;
  if (rc == MPI_SUCCESS) {
    // A copy callback's flag other than 0 or 1 means whatever the library made of it (the
    // standard says "non-zero copies", Open MPI copies only on 1): ask the library, so the model
    // follows it instead of calling its choice a divergence (callback.bad-flag was reported).
    if (RunLog* l = replay.replay().log; l && l->odd_flag) {
      for (RanCopy& c : l->copies) odd_flag_as_library(kind, fresh, c.keyval, c.rc, &c.flag, &c.value_out);
    }
    for (Observation& o : replay.replay().seen)
      if (o.copy) odd_flag_as_library(kind, fresh, o.engine_id, o.rc, &o.flag, &o.value_out);
    wait_for_free_of(fresh);
    note_created(kind, fresh);
    e.forget_object(kind, fresh);  // a stale registration of a reused handle, if any
    if (dup_ran(kind, old, fresh, replay.replay(), origin_site(call))) {
      replay.dismiss();
      return rc;
    }
    replay.unlog();
    res = e.dup_object(kind, old, fresh, origin_site(call));
    if (res.status == Status::CapacityExhausted) {  // the new object goes unchecked
      replay.replay().lenient = true;
      replay.finish();
      object_limit();
      return rc;
    }
    replay.finish();
    if (!res.ok()) {
      result_divergence(call, rc, res, 0);
      register_new(kind, fresh, origin_site(call));
    }
    return rc;
  }
  // The library refused (a copy callback failed, or it ran out of something): the model must
  // fail too, replaying what the library ran.
  replay.unlog();
  if (refused_unknown(call, kind, old, rc, replay)) return rc;
  replay.replay().lenient = true;
  const Handle scratch = scratch_handle();
  res = e.dup_object(kind, old, scratch);
  replay.finish();
  if (res.ok()) {
    e.forget_object(kind, scratch);
    result_divergence(call, rc, res, 0);
  }
  return rc;
}

int on_construct(const Call& call, Handle parent, const FnRef<int(Handle*)>& forward) {
  CallScope scope(call);
  int rc;
  Handle fresh = 0;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward(&fresh) : rc;
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  if (r.mode == Mode::Emulate) {
    rc = forward(&fresh);
    if (rc == MPI_SUCCESS) register_new(kind, fresh, origin_site(call));
    if (rc == MPI_SUCCESS && fresh != null_handle(kind)) note_constructed(call, kind, parent, fresh);
    return rc;
  }
  ReplayScope replay(call, false);
  rc = forward(&fresh);
  if (rc == MPI_SUCCESS && fresh != null_handle(kind)) {
    register_new(kind, fresh, origin_site(call));
    // These constructors copy no attributes. Ask the library whether the new object carries any
    // (Open MPI's MPI_Comm_create_group copies them, through callbacks or MPI_COMM_DUP_FN): mirror
    // what it holds, so later calls compare like with like, and report it once per keyval.
    for (const KeyvalInfo& k : r.engine->live_keyvals()) {
      if (k.kind != kind || k.spec.copy.action == CopyAction::NullCopy) continue;
      const KeyRecord* rec = record_for(k.id);
      std::uint64_t value = 0;
      if (!rec || !library_attr(kind, fresh, rec->user_id, &value)) continue;
      r.engine->set_attr(kind, fresh, k.id, Binding::C, value);
      for (Observation& o : replay.replay().seen)
        if (o.copy && o.engine_id == k.id) o.used = true;
      divergence(call, "copied an attribute onto the new object, which this call must not do", true, rec->user_id,
                 DivergenceSite::CopiesAttributes);
    }
    note_constructed(call, kind, parent, fresh);
  }
  replay.finish();  // copy callbacks it ran for objects it did not return are reported here
  return rc;
}

int on_obtain(const Call& call, Returns how, const FnRef<int(std::vector<Handle>*)>& forward) {
  CallScope scope(call);
  int rc;
  std::vector<Handle> got;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward(&got) : rc;
  rc = forward(&got);
  if (rc != MPI_SUCCESS) return rc;
  Engine& e = *state().engine;
  const ObjectKind kind = call.api->kind;
  for (const Handle h : got) {
    if (h == null_handle(kind)) continue;
    ObjectInfo info{};
    if (!e.object_info(kind, h, &info)) {  // new to the tool, or freed through it: live again
      note_created(kind, h);
      adopt(kind, h);
    } else if (info.flags & kObjectPredefined) {
      continue;  // MPI_INT & co: the constants themselves
    } else if (how == Returns::Alias) {
      add_reference(kind, h);
    } else if (how == Returns::New) {
      register_new(kind, h, origin_site(call));  // a registration the tool missed the end of
    }
  }
  return rc;
}

int on_free(const Call& call, Handle h, const FnRef<int()>& forward) {
  CallScope scope(call);
  int rc;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward() : rc;
  Runtime& r = state();
  Engine& e = *r.engine;
  const ObjectKind kind = call.api->kind;
  if (in_callback_for(kind, h)) return reentrant(call, kind, h);
  if (kind == ObjectKind::Win) forget_window_base(h);  // (a failed free: its MPI_WIN_BASE goes unchecked)
  if (unchecked(kind, &h, nullptr)) return forward();
  if (drop_reference(kind, h)) {
    // One of several references to a live object (MPI_Type_get_contents handed it out again): the
    // library drops it and the object lives on, with its attributes.
    ReplayScope replay(call, true);
    rc = forward();
    replay.finish();
    if (rc != MPI_SUCCESS) add_reference(kind, h);
    return rc;
  }
  t_state.ctx.adopted.set = false;
  if (r.mode == Mode::Emulate) {
    const Result res = with_object(call, kind, h, [&] { return e.free_object(kind, h); });
    if (!res.ok()) return refuse(call, res, kind, h, 0, 0);
    rc = forward();
    if (rc == MPI_SUCCESS) note_freed(kind, h);
    return rc;
  }
  ObjectInfo info{};
  Result res = check_object(call, kind, h, &info);
  if (res.ok() && (info.flags & kObjectPredefined)) res.status = Status::ObjectPredefined;
  if (!res.ok()) return refuse(call, res, kind, h, 0, 0);
  const bool adopted = adopted_now(kind, h);
  DeferredFrees deferred;  // (closed after the window: both end with the mirror)
  FreeWindow window(h);
  ReplayScope replay(call, false);
  LogRuns log(replay, kind, h, false);
  rc = forward();
  if (rc == MPI_SUCCESS && free_ran(kind, h, replay.replay())) {
    replay.dismiss();
    note_freed(kind, h);
    forget_references(kind, h);
    return rc;
  }
  replay.unlog();
  if (rc != MPI_SUCCESS) replay.replay().lenient = true;
  // A handle the tool never saw made, and the library refuses it: nothing was known to diverge
  // from (e.g. the handle Open MPI leaves behind after a failed MPI_Type_dup).
  if (adopted && refused_unknown(call, kind, h, rc, replay)) return rc;
  res = e.free_object(kind, h);
  if (rc == MPI_SUCCESS && !res.ok()) replay.replay().lenient = true;  // the library went on (reported below)
  replay.finish();
  if (rc == MPI_SUCCESS) {
    note_freed(kind, h);
    forget_references(kind, h);
    if (!res.ok()) {
      result_divergence(call, rc, res, 0);
      e.forget_object(kind, h);
    }
  } else if (res.ok()) {
    result_divergence(call, rc, res, 0);
    adopt(kind, h);
  } else {
    follow_failed_free(call, kind, h);
  }
  return rc;
}

// How many datatypes MPI_Type_get_contents(_c) returned for `type` (at most `max`). Asked with
// MPI_Type_get_envelope_c where the library has it (MPI-4.0): a datatype made with large counts
// (MPI_Type_create_struct_c & co: mpi4py 4 makes them so) has an envelope only there, and
// MPI_Type_get_envelope fails on it (Open MPI 6.0: MPI_ERR_TYPE, on MPI_COMM_WORLD's handler).
int contents_datatypes(MPI_Datatype type, int max) noexcept {
  using EnvelopeC = int (*)(MPI_Datatype, MPI_Count*, MPI_Count*, MPI_Count*, MPI_Count*, int*);
  static const auto envelope_c = reinterpret_cast<EnvelopeC>(dlsym(RTLD_DEFAULT, "PMPI_Type_get_envelope_c"));
  if (envelope_c) {
    MPI_Count ni = 0, na = 0, nc = 0, nd = 0;
    int combiner = 0;
    if (envelope_c(type, &ni, &na, &nc, &nd, &combiner) != MPI_SUCCESS || nd < 0) return 0;
    return nd < max ? static_cast<int>(nd) : max;
  }
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return 0;
  return nd < max ? nd : max;
}

}  // namespace attrcheck::rt
