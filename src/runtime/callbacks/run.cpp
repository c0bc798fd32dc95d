// Running a user callback under its frame (see run.hpp), in any binding: the call made, an
// exception caught, a bad return code or flag reported, each finding naming the callback.
#include "runtime/callbacks/run.hpp"

#include <strings.h>

#include <dlfcn.h>

#include "runtime/process/call_counts.hpp"
#include "runtime/callbacks/throw_site.hpp"
#include "runtime/process/findings.hpp"
#include "runtime/process/library.hpp"
#include "runtime/process/portability.hpp"
#include "runtime/process/provenance.hpp"
#include "runtime/process/state.hpp"
#include "runtime/python/python_frames.hpp"
#include "report/python_frames.hpp"

#include <cstring>

namespace attrcheck::rt {

namespace {

// "copy callback my_copy of keyval 12<tail>"; the name comes from dladdr (normal path only).
// A Python callback (python_name, defined in python_file at python_line): "delete callback
// delete_fn (app.py:12) of keyval 12<tail>".
void callback_detail(char* buf, std::size_t size, const char* what, const void* fn, int keyval,
                     const char* tail, const char* python_name = nullptr, const char* python_file = nullptr,
                     int python_line = 0) {
  Appender a{buf, size};
  a.put(what);
  a.put(" ");
  Dl_info dl{};
  if (python_name) {
    const char* slash = python_file ? std::strrchr(python_file, '/') : nullptr;
    a.put(python_name);
    a.put(" (");
    a.put(slash ? slash + 1 : python_file);
    a.put(":");
    a.num(python_line);
    a.put(")");
  } else if (fn && dladdr(fn, &dl) && dl.dli_sname) {
    a.put(dl.dli_sname);
  } else {
    a.hex(reinterpret_cast<std::uintptr_t>(fn));
  }
  a.put(" of keyval ");
  a.keyval(keyval);
  a.put(tail);
}

}  // namespace

// `engine_key`: the keyval's engine id, for its provenance (where it was created); `first`: a
// provenance stack to put before it (where an exception was thrown).
void report_callback(Rule rule, const char* what, int keyval, const char* tail, const void* fn, int engine_key,
                     const ProvenanceInput* first) {
  FindingInput in;
  ProvenanceStorage storage;
  if (first) in.provenance[in.provenance_count++] = *first;
  add_keyval_provenance(in, storage, engine_key, false);
  // mpi4py's callback: the Python function it ran, first in the provenance, and the Python frames
  // of the call that ran it (python_frames.hpp).
  void* function = nullptr;
  void* frames[kStackFrames];
  int depth = 0;
  const bool copy = std::strncmp(what, "copy", 4) == 0;
  const char *name = nullptr, *file = nullptr;
  int line = 0;
  const void* extra_state = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(in.callbacks.extra_state));
  if (python::active() && in.has_callbacks && !first &&
      python::mpi4py_callback(fn, extra_state, copy, &function, frames, kStackFrames, &depth)) {
    in.python_frames = frames;
    in.python_depth = depth;
    if (function && in.provenance_count < kMaxProvenance &&
        python_frame_text(python_frame_id(function), &file, &name, &line)) {
      for (int i = in.provenance_count++; i > 0; --i) in.provenance[i] = in.provenance[i - 1];
      in.provenance[0] = ProvenanceInput{copy ? "Python copy callback" : "Python delete callback", &function, 1};
    }
  }
  char detail[320];
  callback_detail(detail, sizeof detail, what, fn, keyval, tail, name, file, line);
  in.rule = rule;
  in.call = current_call_name();
  in.site = fn;
  in.site_is_entry = true;  // symbolized as is, not as a return address
  in.has_keyval = true;
  in.keyval = keyval;
  in.detail = detail;
  report(in);
}

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
using FortranAintCopy = void (*)(Fint*, Fint*, MPI_Aint*, MPI_Aint*, MPI_Aint*, Fint*, Fint*);
using FortranIntCopy = void (*)(Fint*, Fint*, Fint*, Fint*, Fint*, Fint*, Fint*);
using FortranAintDelete = void (*)(Fint*, Fint*, MPI_Aint*, MPI_Aint*, Fint*);
using FortranIntDelete = void (*)(Fint*, Fint*, Fint*, Fint*, Fint*);

int call_copy(ObjectKind kind, Binding lang, void* fn, Handle old, int key, std::uint64_t extra, std::uint64_t in,
              std::uint64_t* out, int* flag) {
  if (lang == Binding::C) return call_c_copy(kind, fn, old, key, extra, in, out, flag);
  count_call(Family::Callback, Lang::Fortran);
  Fint object = fortran_handle(kind, old), fkey = key, logical = 0, ierr = MPI_SUCCESS;
  if (lang == Binding::FortranAint) {
    MPI_Aint e = static_cast<MPI_Aint>(extra), v_in = static_cast<MPI_Aint>(in), v_out = 0;
    reinterpret_cast<FortranAintCopy>(fn)(&object, &fkey, &e, &v_in, &v_out, &logical, &ierr);
    *out = static_cast<std::uint64_t>(v_out);
  } else {
    Fint e = static_cast<Fint>(extra), v_in = static_cast<Fint>(in), v_out = 0;
    reinterpret_cast<FortranIntCopy>(fn)(&object, &fkey, &e, &v_in, &v_out, &logical, &ierr);
    *out = static_cast<std::uint64_t>(static_cast<std::int64_t>(v_out));
  }
  *flag = logical;  // as the callback left it: run_copy reports a LOGICAL that is neither .TRUE. nor .FALSE.
  return ierr;
}

int call_delete(ObjectKind kind, Binding lang, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra) {
  if (lang == Binding::C) return call_c_delete(kind, fn, object, key, value, extra);
  count_call(Family::Callback, Lang::Fortran);
  Fint fobject = fortran_handle(kind, object), fkey = key, ierr = MPI_SUCCESS;
  if (lang == Binding::FortranAint) {
    MPI_Aint v = static_cast<MPI_Aint>(value), e = static_cast<MPI_Aint>(extra);
    reinterpret_cast<FortranAintDelete>(fn)(&fobject, &fkey, &v, &e, &ierr);
  } else {
    Fint v = static_cast<Fint>(value), e = static_cast<Fint>(extra);
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
  if (rule == Rule::CallbackError && !std::strcmp(what, "delete callback") && t_state.ctx.call &&
      t_state.ctx.call->api && !strcasecmp(t_state.ctx.call->api->name, "MPI_Comm_free")) {
    // What MPI_Comm_free does after a failed delete callback is the library's (MPICH goes on).
    // Emulate mode stops, as the standard says.
    FindingInput in = finding(Rule::Count, *t_state.ctx.call);
    in.has_keyval = true;
    in.keyval = key;
    depended_on(Question::FailedDeleteInFree, in,
                state().mode == Mode::Shadow && release_has(release(), "comm-free-drops-attributes-on-failed-delete"),
                "MPI_Comm_free goes on after this failed delete callback: it runs the others and drops every "
                "attribute, and fails only if the last callback it ran failed",
                "MPI_Comm_free stops at this failed delete callback and fails: the communicator stays, with this "
                "attribute and those not yet deleted");
  }
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

}  // namespace

// Emulate mode's cache paths (set_emulated, delete_emulated): a C delete callback run
// as the invoker runs it for the engine (the frame, an exception caught, an error reported).
int run_c_delete(ObjectKind kind, void* fn, Handle object, int key, std::uint64_t value, std::uint64_t extra) {
  CbFrame frame{fn, object, t_state.ctx.call, t_state.ctx.cb_top, key, kind, false, false};
  return run_delete_as(frame, key, [&] { return call_c_delete(kind, fn, object, key, value, extra); });
}

// A delete callback the engine asks for that is not the invoker's common case: a Fortran one, or
// MPI_Finalize's. (Out of line: the common case's frame stays small.)
int run_engine_delete(const DeleteCall& c) {
  const bool teardown = c.cause == CallbackCause::Finalize && c.object == state().world;
  return run_delete(c.kind, c.lang, c.fn, c.object, c.keyval, c.value, c.extra_state, teardown, c.keyval);
}

}  // namespace attrcheck::rt
