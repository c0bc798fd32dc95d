// Running user callbacks: the per-thread callback frames, the guarded runners (exceptions,
// bad return codes and flags reported), the trampolines the library calls in shadow mode, and the
// engine's invoker (emulate runs user code; shadow replays what the library ran).
#include <dlfcn.h>

#include <cstring>

#include "runtime/call_counts.hpp"
#include "runtime/callbacks/invoker.hpp"
#include "runtime/callbacks/replay.hpp"
#include "runtime/callbacks/run.hpp"
#include "runtime/callbacks/throw_site.hpp"
#include "runtime/mpi_profile.hpp"
#include "runtime/process/findings.hpp"
#include "runtime/process/keyvals.hpp"
#include "runtime/process/library.hpp"
#include "runtime/process/objects.hpp"
#include "runtime/process/provenance.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

namespace {

// ---- running user callbacks (both modes) ---------------------------------------------------------

// "copy callback my_copy of keyval 12<tail>"; the name comes from dladdr (normal path only).
void callback_detail(char* buf, std::size_t size, const char* what, const void* fn, int keyval,
                     const char* tail) {
  Appender a{buf, size};
  a.put(what);
  a.put(" ");
  Dl_info dl{};
  if (fn && dladdr(fn, &dl) && dl.dli_sname) {
    a.put(dl.dli_sname);
  } else {
    a.hex(reinterpret_cast<std::uintptr_t>(fn));
  }
  a.put(" of keyval ");
  a.num(keyval);
  a.put(tail);
}

// `engine_key`: the keyval's engine id, for its provenance (where it was created); `first`: a
// provenance stack to put before it (where an exception was thrown).
void report_callback(Rule rule, const char* what, int keyval, const char* tail, const void* fn, int engine_key,
                     const ProvenanceInput* first = nullptr) {
  char detail[320];
  callback_detail(detail, sizeof detail, what, fn, keyval, tail);
  FindingInput in;
  ProvenanceStorage storage;
  if (first) in.provenance[in.provenance_count++] = *first;
  add_keyval_provenance(in, storage, engine_key, false);
  in.rule = rule;
  in.call = current_call_name();
  in.site = fn;
  in.site_is_entry = true;  // symbolized as is, not as a return address
  in.has_keyval = true;
  in.keyval = keyval;
  in.detail = detail;
  report(in);
}

}  // namespace

void report_exception(const CbFrame& frame, int engine_key) {
  char thrown[160];
  describe_current_exception(thrown, sizeof thrown);
  char tail[220];
  Appender a{tail, sizeof tail};
  a.put(" threw ");
  a.put(thrown);
  a.put(" (caught by attrcheck; the call fails)");
  ProvenanceInput where;
  where.what = "exception thrown";
  where.frames = throw_site_frames(&where.depth);
  report_callback(Rule::CallbackException, frame.copy ? "copy callback" : "delete callback", frame.keyval, tail,
                  frame.fn, engine_key, where.frames ? &where : nullptr);
}

namespace {

// The callback signatures of the three bindings (Fortran passes everything by reference; its
// error code comes back in the last argument).
using FortranAintCopy = void (*)(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Aint*, MPI_Aint*, MPI_Fint*, MPI_Fint*);
using FortranIntCopy = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using FortranAintDelete = void (*)(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Aint*, MPI_Fint*);
using FortranIntDelete = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);

// A C copy callback's call.
inline int call_c_copy(ObjectKind kind, void* fn, Handle old, int key, std::uint64_t extra, std::uint64_t in,
                       std::uint64_t* out, int* flag) {
  count_call(Family::Callback, Lang::C);
  void* const extra_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(extra));
  void* const in_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(in));
  switch (kind) {
    case ObjectKind::Comm:
      return reinterpret_cast<MPI_Comm_copy_attr_function*>(fn)(from_handle<MPI_Comm>(old), key, extra_ptr, in_ptr, out, flag);
    case ObjectKind::Type:
      return reinterpret_cast<MPI_Type_copy_attr_function*>(fn)(from_handle<MPI_Datatype>(old), key, extra_ptr, in_ptr, out, flag);
    default:
      return reinterpret_cast<MPI_Win_copy_attr_function*>(fn)(from_handle<MPI_Win>(old), key, extra_ptr, in_ptr, out, flag);
  }
}

int call_copy(ObjectKind kind, Binding lang, void* fn, Handle old, int key, std::uint64_t extra, std::uint64_t in,
              std::uint64_t* out, int* flag) {
  if (lang == Binding::C) return call_c_copy(kind, fn, old, key, extra, in, out, flag);
  count_call(Family::Callback, Lang::Fortran);
  MPI_Fint object = fortran_handle(kind, old), fkey = key, logical = 0, ierr = MPI_SUCCESS;
  if (lang == Binding::FortranAint) {
    MPI_Aint e = static_cast<MPI_Aint>(extra), v_in = static_cast<MPI_Aint>(in), v_out = 0;
    reinterpret_cast<FortranAintCopy>(fn)(&object, &fkey, &e, &v_in, &v_out, &logical, &ierr);
    *out = static_cast<std::uint64_t>(v_out);
  } else {
    MPI_Fint e = static_cast<MPI_Fint>(extra), v_in = static_cast<MPI_Fint>(in), v_out = 0;
    reinterpret_cast<FortranIntCopy>(fn)(&object, &fkey, &e, &v_in, &v_out, &logical, &ierr);
    *out = static_cast<std::uint64_t>(static_cast<std::int64_t>(v_out));
  }
  *flag = logical;  // as the callback left it: run_copy reports a LOGICAL that is neither .TRUE. nor .FALSE.
  return ierr;
}

// A C delete callback's call.
inline int call_c_delete(ObjectKind kind, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra) {
  count_call(Family::Callback, Lang::C);
  void* const extra_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(extra));
  void* const value_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(value));
  switch (kind) {
    case ObjectKind::Comm:
      return reinterpret_cast<MPI_Comm_delete_attr_function*>(fn)(from_handle<MPI_Comm>(object), key, value_ptr, extra_ptr);
    case ObjectKind::Type:
      return reinterpret_cast<MPI_Type_delete_attr_function*>(fn)(from_handle<MPI_Datatype>(object), key, value_ptr, extra_ptr);
    default:
      return reinterpret_cast<MPI_Win_delete_attr_function*>(fn)(from_handle<MPI_Win>(object), key, value_ptr, extra_ptr);
  }
}

int call_delete(ObjectKind kind, Binding lang, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra) {
  if (lang == Binding::C) return call_c_delete(kind, fn, object, key, value, extra);
  count_call(Family::Callback, Lang::Fortran);
  MPI_Fint fobject = fortran_handle(kind, object), fkey = key, ierr = MPI_SUCCESS;
  if (lang == Binding::FortranAint) {
    MPI_Aint v = static_cast<MPI_Aint>(value), e = static_cast<MPI_Aint>(extra);
    reinterpret_cast<FortranAintDelete>(fn)(&fobject, &fkey, &v, &e, &ierr);
  } else {
    MPI_Fint v = static_cast<MPI_Fint>(value), e = static_cast<MPI_Fint>(extra);
    reinterpret_cast<FortranIntDelete>(fn)(&fobject, &fkey, &v, &e, &ierr);
  }
  return ierr;
}

}  // namespace

void report_callback_value(Rule rule, const char* what, int key, const char* prefix, long long value,
                           const void* fn, int engine_key) {
  char tail[128];
  Appender a{tail, sizeof tail};
  a.put(prefix);
  a.num(value);
  a.put(" during ");
  a.put(current_call_name());
  report_callback(rule, what, key, tail, fn, engine_key);
}

void report_copy_result(int rc, int flag, int key, const void* fn, int engine_key) {
  if (rc != MPI_SUCCESS) {
    report_callback_value(Rule::CallbackError, "copy callback", key, " returned ", rc, fn, engine_key);
  } else if (flag != 0 && flag != 1) {
    report_callback_value(Rule::CallbackBadFlag, "copy callback", key, " set *flag = ", flag, fn, engine_key);
  }
}

int run_copy(ObjectKind kind, Binding lang, void* fn, Handle old, int key, std::uint64_t extra, std::uint64_t in,
             std::uint64_t* out, int* flag, int engine_key) {
  CbFrame frame{fn, old, t_state.ctx.call, t_state.ctx.cb_top, key, kind, true, false};
  bool threw = false;
  const int rc = run_guarded(frame, engine_key, &threw,
                             [&] { return call_copy(kind, lang, fn, old, key, extra, in, out, flag); });
  if (!threw) report_copy_result(rc, *flag, key, fn, engine_key);
  return rc;
}

[[gnu::noinline]] bool finalizing_delete(Handle object) noexcept {
  return phase() == Phase::Finalizing && object != state().self;
}

namespace {

int run_delete(ObjectKind kind, Binding lang, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra,
               bool teardown, int engine_key) {
  CbFrame frame{fn, object, t_state.ctx.call, t_state.ctx.cb_top, key, kind, false, teardown};
  return run_delete_as(frame, engine_key, [&] { return call_delete(kind, lang, fn, object, key, value, extra); });
}

// ---- the engine's invoker: emulate runs user code, shadow replays the library's runs -----------

constexpr int kFlagUnset = 0x5eed;

// The library passed a callback (`which`: "copy" or "delete") another value than the model holds.
void value_divergence(const Replay& r, const char* which, std::uint64_t passed, std::uint64_t model, int user_key) {
  char d[160];
  Appender a{d, sizeof d};
  a.put("passed ");
  a.hex(passed);
  a.put(" to a ");
  a.put(which);
  a.put(" callback where the attribute's value is ");
  a.hex(model);
  divergence(*r.call, d, true, user_key);
}

// The observations not known to be used yet. The library usually runs the callbacks of a dup or
// free in the order the model replays them, so the used ones form a prefix that the searches skip:
// without it each search went through all earlier observations (64 attributes: ~170 instructions
// a callback for copy and again for delete, Open MPI shadow dup + free, callgrind).
Observation* unused_begin(Replay& r) noexcept { return r.seen.begin() + r.used_below; }

// Marks `o` used, advancing the used prefix past it.
void mark_used(Replay& r, Observation& o) noexcept {
  o.used = true;
  Observation* const first = r.seen.begin();
  while (r.used_below < r.seen.size() && first[r.used_below].used) ++r.used_below;
}

int replay_copy(Replay& r, const CopyCall& c, std::uint64_t* out, int* flag) {
  for (Observation* p = unused_begin(r); p != r.seen.end(); ++p) {
    Observation& o = *p;
    if (o.used || !o.copy || o.object != c.old_object || o.engine_id != c.keyval) continue;
    mark_used(r, o);
    if (o.value_in != c.value_in)
      value_divergence(r, "copy", o.value_in, c.value_in, record_for(c.keyval) ? record_for(c.keyval)->user_id : c.keyval);
    *out = o.value_out;
    *flag = o.flag;
    return o.rc;
  }
  if (!r.lenient)
    divergence(*r.call, "did not run a copy callback the standard requires", true,
               record_for(c.keyval) ? record_for(c.keyval)->user_id : c.keyval, DivergenceSite::MissingCallback);
  *flag = 0;
  return MPI_SUCCESS;
}

// Whether the library's run `o` may be the one on `object` of `kind`: it is on that object, or
// it is a Fortran callback's where the library is known to pass those a wrong handle (the
// profile's WrongHandle divergence), whose handle then says nothing about the object.
bool may_be_on(const Observation& o, ObjectKind kind, Handle object) noexcept {
  if (o.object == object) return true;
  if (fortran_delete_handles_trusted() || o.kind != kind) return false;
  const KeyRecord* rec = record_for(o.engine_id);
  return rec && rec->lang != Binding::C;
}

// (Out of line: inlined, its frame was set up on every emulated delete callback too.)
[[gnu::noinline]] int replay_delete(Replay& r, const DeleteCall& c) {
  const KeyRecord* rec = record_for(c.keyval);
  const int user_key = rec ? rec->user_id : c.keyval;
  if (r.has_ordered_object && c.object == r.ordered_object) {
    for (const Observation* p = unused_begin(r); p != r.seen.end(); ++p) {
      const Observation& o = *p;
      if (o.used || o.copy || !may_be_on(o, c.kind, c.object)) continue;
      if (o.engine_id != c.keyval)
        divergence(*r.call, "ran MPI_COMM_SELF's delete callbacks out of the order they were set (newest first)",
                   true, user_key, DivergenceSite::SelfDeleteOrder);
      break;
    }
  }
  for (Observation* p = unused_begin(r); p != r.seen.end(); ++p) {
    Observation& o = *p;
    if (o.used || o.copy || o.object != c.object || o.engine_id != c.keyval) continue;
    mark_used(r, o);
    if (c.lang == Binding::C && c.repr == Binding::C && o.value_in != c.value)
      value_divergence(r, "delete", o.value_in, c.value, user_key);
    return o.rc;
  }
  // A Fortran delete callback the library ran for this keyval, but passed another object's handle
  // (Open MPI 4.1.4 passes 0): the run is this one; the handle is a divergence of its own.
  if (rec && rec->lang != Binding::C) {
    for (Observation* p = unused_begin(r); p != r.seen.end(); ++p) {
      Observation& o = *p;
      if (o.used || o.copy || o.engine_id != c.keyval || o.kind != c.kind) continue;
      mark_used(r, o);
      char d[200];
      Appender a{d, sizeof d};
      // (No handle conversions here: this may run after the library's MPI_Finalize.)
      a.put("passed Fortran handle ");
      a.num(o.fortran_object);
      a.put(" to a Fortran delete callback for ");
      const char* name = object_name(c.kind, c.object);
      if (name) {
        a.put(name);
      } else {
        a.put(to_string(c.kind));
        a.put(" ");
        a.hex(c.object);
      }
      divergence(*r.call, d, true, user_key, DivergenceSite::WrongHandle);
      return o.rc;
    }
  }
  const bool optional = r.lenient || c.cause == CallbackCause::DupRollback ||
                        (c.cause == CallbackCause::Finalize && c.object != state().self);
  if (!optional)
    divergence(*r.call, "did not run a delete callback the standard requires", true, user_key,
               DivergenceSite::MissingCallback);
  return MPI_SUCCESS;
}

}  // namespace

// Emulate mode's cache paths (hooks.cpp: set_emulated, delete_emulated): a C delete callback run
// as the invoker below runs it for the engine (the frame, an exception caught, an error reported).
int run_c_delete(ObjectKind kind, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra) {
  CbFrame frame{fn, object, t_state.ctx.call, t_state.ctx.cb_top, key, kind, false, false};
  return run_delete_as(frame, key, [&] { return call_c_delete(kind, fn, object, key, value, extra); });
}

namespace {

class RuntimeInvoker final : public CallbackInvoker {
 public:
  int copy(const CopyCall& c, std::uint64_t* out, int* flag) override {
    if (Replay* r = t_state.ctx.replay) return replay_copy(*r, c, out, flag);
    *flag = kFlagUnset;
    int rc;
    if (__builtin_expect(c.lang == Binding::C, 1)) {
      // The common case, a C callback: run as run_copy runs it, the call made directly and the
      // report only looked for when something is off (MPICH emulate dup [user] ~26 instructions an
      // attribute less, callgrind).
      CbFrame frame{c.fn, c.old_object, t_state.ctx.call, t_state.ctx.cb_top, c.keyval, c.kind, true, false};
      bool threw = false;
      rc = run_guarded(frame, c.keyval, &threw, [&] {
        return call_c_copy(c.kind, c.fn, c.old_object, c.keyval, c.extra_state, c.value_in, out, flag);
      });
      if (__builtin_expect(!threw && (rc != MPI_SUCCESS || (*flag != 0 && *flag != 1)), 0))
        report_copy_result(rc, *flag, c.keyval, c.fn, c.keyval);
    } else {
      rc = run_copy(c.kind, c.lang, c.fn, c.old_object, c.keyval, c.extra_state, c.value_in, out, flag, c.keyval);
    }
    flag_left_unset(c, rc, flag);
    return rc;
  }
  // A dup's copy callbacks: the C ones one after another under one frame, its function and keyval
  // set for each, each call checked as copy() checks it (a Fortran one goes through copy(), its
  // frame over this one). (MPICH emulate dup + free [user], with del_run: ~40 instructions an
  // attribute less than a call of copy() / del() each, engine side included, callgrind.)
  // (*as_given accumulated branch-free, as each outcome is checked: the engine's own pass over
  // the outcomes cost ~16 instructions an attribute, MPICH emulate dup + free [user], callgrind.)
  std::size_t copy_run(const CopyCall* calls, std::size_t n, CopyOutcome* out, bool* as_given) override {
    if (t_state.ctx.replay || n == 0) return CallbackInvoker::copy_run(calls, n, out, as_given);
    std::uint64_t differs = 0;
    CbFrame frame{calls[0].fn, calls[0].old_object, t_state.ctx.call, t_state.ctx.cb_top, calls[0].keyval, calls[0].kind, true, false};
    CbGuard guard(frame);
    // (Walked by pointer: with the accumulator, an index and the outcome's address no longer fit
    // in registers and were read back from the stack each time.)
    CopyOutcome* o_at = out;
    for (const CopyCall* c_at = calls; c_at != calls + n; ++c_at, ++o_at) {
      const CopyCall& c = *c_at;
      CopyOutcome& o = *o_at;
      o.value = 0;
      o.threw = false;
      int rc;
      if (__builtin_expect(c.lang == Binding::C, 1)) {
        frame.fn = c.fn;
        frame.keyval = c.keyval;
        std::atomic_signal_fence(std::memory_order_release);  // (what a signal handler reads of it)
        o.flag = kFlagUnset;
        throw_site_reset();
        bool threw = false;
        try {
          rc = call_c_copy(c.kind, c.fn, c.old_object, c.keyval, c.extra_state, c.value_in, &o.value, &o.flag);
        } catch (...) {
          report_exception(frame, c.keyval);
          threw = true;
          rc = MPI_ERR_OTHER;
        }
        if (__builtin_expect(!threw && (rc != MPI_SUCCESS || (o.flag != 0 && o.flag != 1)), 0))
          report_copy_result(rc, o.flag, c.keyval, c.fn, c.keyval);
        flag_left_unset(c, rc, &o.flag);
      } else {
        rc = copy(c, &o.value, &o.flag);
      }
      o.rc = rc;
      if (rc != MPI_SUCCESS) {
        *as_given = false;
        return static_cast<std::size_t>(c_at - calls) + 1;
      }
      differs |= (o.value ^ c.value_in) | static_cast<std::uint32_t>(o.flag ^ 1);
    }
    *as_given = differs == 0;
    return n;
  }
  int del(const DeleteCall& c) override {
    if (Replay* r = t_state.ctx.replay) return replay_delete(*r, c);
    // The common case, a C callback outside MPI_Finalize (a set's or a delete's, a free's): no
    // teardown test, and the call made as the trampolines make it, without call_delete's test of
    // the language (emulate set [user] ~15 instructions less, callgrind).
    if (__builtin_expect(c.lang == Binding::C && c.cause != CallbackCause::Finalize, 1)) {
      CbFrame frame{c.fn, c.object, t_state.ctx.call, t_state.ctx.cb_top, c.keyval, c.kind, false, false};
      return run_delete_as(frame, c.keyval, [&] { return call_c_delete(c.kind, c.fn, c.object, c.keyval, c.value, c.extra_state); });
    }
    return del_other(c);
  }

  // A free's delete callbacks: the C ones one after another under one frame, its function and
  // keyval set for each, each call checked as del() checks it (a Fortran one goes through del(),
  // its frame over this one). (With copy_run: see there.)
  void del_run(const DeleteCall* first, DeleteNext next, void* ctx) override {
    if (t_state.ctx.replay || first->cause == CallbackCause::Finalize) return CallbackInvoker::del_run(first, next, ctx);
    const ObjectKind kind = first->kind;
    const Handle object = first->object;
    CbFrame frame{first->fn, object, t_state.ctx.call, t_state.ctx.cb_top, first->keyval, kind, false, false};
    CbGuard guard(frame);
    for (const DeleteCall* call = first;;) {
      const DeleteCall& c = *call;
      int rc;
      if (__builtin_expect(c.lang == Binding::C, 1)) {
        // (The function and key in locals: the signal fence would make the call read them again.)
        void* const fn = c.fn;
        const int key = c.keyval;
        frame.fn = fn;
        frame.keyval = key;
        std::atomic_signal_fence(std::memory_order_release);  // (what a signal handler reads of it)
        throw_site_reset();
        bool threw = false;
        try {
          rc = call_c_delete(kind, fn, object, key, c.value, c.extra_state);
        } catch (...) {
          report_exception(frame, key);
          threw = true;
          rc = MPI_ERR_OTHER;
        }
        if (__builtin_expect(rc != MPI_SUCCESS && !threw, 0))
          report_callback_value(Rule::CallbackError, "delete callback", key, " returned ", rc, fn, key);
      } else {
        rc = del_of(*first, c);
      }
      call = next(ctx, rc, false);
      if (!call) return;
    }
  }
  // A Fortran callback of a free's run: the call with the run's kind, object and cause.
  [[gnu::noinline]] int del_of(const DeleteCall& first, const DeleteCall& c) {
    DeleteCall full = c;
    full.kind = first.kind;
    full.object = first.object;
    full.cause = first.cause;
    return del(full);
  }

 private:
  // A copy callback that returned without setting *flag: reported (unless it failed), and not copied.
  static void flag_left_unset(const CopyCall& c, int rc, int* flag) {
    if (__builtin_expect(*flag != kFlagUnset, 1)) return;
    if (rc == MPI_SUCCESS)
      report_callback(Rule::CallbackBadFlag, "copy callback", c.keyval,
                      " returned without setting *flag (treated as 0: not copied)", c.fn, c.keyval);
    *flag = 0;
  }
  // A Fortran callback, or MPI_Finalize's. (Out of line: the common case's frame stays small.)
  [[gnu::noinline]] static int del_other(const DeleteCall& c) {
    const bool teardown = c.cause == CallbackCause::Finalize && c.object == state().world;
    return run_delete(c.kind, c.lang, c.fn, c.object, c.keyval, c.value, c.extra_state, teardown, c.keyval);
  }
};

}  // namespace

CallbackInvoker* new_invoker() { return new RuntimeInvoker; }

void ReplayScope::unlog() {
  RunLog* const log = replay_.log;
  if (!log) return;
  replay_.log = nullptr;
  if (log->copies_of != RunLog::kNone) {
    for (const RanCopy& c : log->copies)
      replay_.seen.push_back(Observation{true, log->kind, log->copies_of, c.keyval, c.rc, c.value_in, c.flag, c.value_out, false, 0});
    log->copies.clear();
  } else {
    for (const RanDelete& d : log->deletes)
      replay_.seen.push_back(Observation{false, log->kind, d.object, d.keyval, d.rc, d.value, 0, 0, false, 0});
    log->deletes.clear();
  }
}

void ReplayScope::finish() {
  unlog();
  t_state.ctx.replay = replay_.outer;  // nothing more is collected
  if (replay_.lenient) return;
  for (const Observation& o : replay_.seen) {
    if (o.used) continue;
    // A delete callback for an object the model does not hold: an object the library made
    // internally, or a deletion it deferred past the free (reported there). Not a new finding.
    if (!o.copy && !live_object(o.kind, o.object)) continue;
    char d[200];
    Appender a{d, sizeof d};
    a.put(o.copy ? "ran a copy callback" : "ran a delete callback");
    a.put(" on ");
    a.put(object_name(o.kind, o.object) ? object_name(o.kind, o.object) : to_string(o.kind));
    a.put(" that the standard does not call here");
    const KeyRecord* rec = record_for(o.engine_id);
    divergence(*replay_.call, d, true, rec ? rec->user_id : o.engine_id, DivergenceSite::ExtraCallback);
  }
}

}  // namespace attrcheck::rt
