// Findings as the runtime reports them (see findings.hpp): a known library divergence is one
// note per run, anything else a finding at its call site.
#include "runtime/process/findings.hpp"

#include <cstdio>

#include "runtime/process/portability.hpp"
#include "runtime/process/provenance.hpp"
#include "runtime/process/rank_report.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/thread_state.hpp"
#include "runtime/python/python_frames.hpp"

namespace attrcheck::rt {

const char* kind_noun(ObjectKind kind) noexcept {
  switch (kind) {
    case ObjectKind::Comm: return "communicator";
    case ObjectKind::Type: return "datatype";
    case ObjectKind::Win: return "window";
  }
  return "object";
}

const char* object_name(ObjectKind kind, Handle h) noexcept {
  if (kind != ObjectKind::Comm) return nullptr;
  if (h == state().world) return "MPI_COMM_WORLD";
  if (h == state().self) return "MPI_COMM_SELF";
  if (h == handle(MPI_COMM_NULL)) return "MPI_COMM_NULL";
  return nullptr;
}

void report(const FindingInput& in) {
  Runtime& r = state();
  if (python::active() && !in.no_stack && !in.python_frames && r.findings.stack_depth() > 0) {
    // Made from Python: the thread's Python frames go into the finding's stack (when it holds
    // the GIL; python_frames.hpp).
    void* frames[kStackFrames];
    FindingInput with = in;
    with.python_depth = python::capture(frames, r.findings.stack_depth());
    with.python_frames = frames;
    r.findings.record(with);
  } else {
    r.findings.record(in);
  }
  if (phase() == Phase::Finalized || phase() == Phase::BeforeInit) write_report();
}

FindingInput finding(Rule rule, const Call& call) {
  FindingInput in;
  in.rule = rule;
  in.call = call.api ? call.api->name : current_call_name();
  in.site = call.caller;
  return in;
}

namespace {
// A known divergence is a fact about the library, not about the program: one note per run and
// divergence (its count says how often it was seen), at no call site and with no stack, at info
// level, so that it fails no gate by default.
void library_note(const KnownDivergence& known) {
  FindingInput in;
  in.rule = Rule::LibraryDivergence;
  in.no_stack = true;
  char detail[400];
  Appender a{detail, sizeof detail};
  a.put(running_library_name());
  a.put(" ");
  a.put(library_version());
  if (!release_probed()) {
    a.put(" (taken as ");
    a.put(release().name);
    a.put(", probed on ");
    a.put(release().probed);
    a.put(")");
  }
  a.put(" [");
  a.put(known.id);
  a.put("]: ");
  a.put(known.behaviour);
  a.put(" (the standard, ");
  a.put(known.standard);
  a.put(")");
  in.detail = detail;
  report(in);
}
}  // namespace

void divergence(const Call& call, const char* detail, bool has_keyval, int keyval, DivergenceSite site) {
  FindingInput in = finding(Rule::ImplDivergence, call);
  if (const KnownDivergence* known = known_divergence(site, in.call)) {
    depended_on_divergence(call, *known, has_keyval, keyval);  // what the program ran into here
    return library_note(*known);
  }
  in.detail = detail;
  in.has_keyval = has_keyval;
  in.keyval = keyval;
  report(in);
}

void result_divergence(const Call& call, int library_rc, Result model, int user_key) {
  char d[200];
  Appender a{d, sizeof d};
  if (library_rc == MPI_SUCCESS) {
    a.put("succeeded where the standard's model fails (");
    a.put(to_string(model.status));
    a.put(")");
  } else {
    a.put("failed with error ");
    a.num(library_rc);
    a.put(" where the standard's model succeeds");
  }
  const bool callback = model.status == Status::CallbackFailed || model.status == Status::CallbackThrew;
  divergence(call, d, true, user_key,
             library_rc == MPI_SUCCESS && callback ? DivergenceSite::ResultDiffers : DivergenceSite::Unclassified);
}

void report_status(const Call& call, Status status, ObjectKind kind, Handle h, int user_key, int engine_key) {
  FindingInput in = finding(Rule::Count, call);
  in.has_keyval = true;
  in.keyval = user_key;
  in.has_object = h != 0;  // keyval calls pass no object
  in.kind = kind;
  in.object = h;
  in.object_name = object_name(kind, h);
  char detail[160] = "";
  ProvenanceStorage storage;
  switch (status) {
    case Status::KeyvalInvalid: in.rule = Rule::KeyvalInvalid; break;
    case Status::KeyvalUnknown: in.rule = Rule::KeyvalUnknown; break;
    case Status::KeyvalFreed:
      in.rule = Rule::KeyvalFreed;
      add_keyval_provenance(in, storage, engine_key, true);
      break;
    case Status::KeyvalDoubleFree:
      in.rule = Rule::KeyvalDoubleFree;
      add_keyval_provenance(in, storage, engine_key, true);
      break;
    case Status::KeyvalPredefined: in.rule = Rule::KeyvalPredefined; break;
    case Status::KeyvalKindMismatch: {
      in.rule = Rule::KeyvalKindMismatch;
      add_keyval_provenance(in, storage, engine_key, false);
      KeyvalInfo info;
      Appender a{detail, sizeof detail};
      if (state().engine->keyval_info(engine_key, &info)) {
        a.put("was created for a ");
        a.put(kind_noun(info.kind));
        a.put(", used on a ");
      } else {
        a.put("belongs to another object kind, used on a ");
      }
      a.put(kind_noun(kind));
      break;
    }
    case Status::ObjectNull:
      in.rule = Rule::ObjectInvalid;
      std::snprintf(detail, sizeof detail, "a null handle");
      in.has_keyval = false;
      break;
    case Status::ObjectUnknown:
      in.rule = Rule::ObjectInvalid;
      std::snprintf(detail, sizeof detail, "not a live object (already freed, or never created)");
      in.has_keyval = false;
      break;
    case Status::ObjectPredefined:
      in.rule = Rule::ObjectInvalid;
      std::snprintf(detail, sizeof detail, "predefined and cannot be freed");
      in.has_keyval = false;
      break;
    case Status::ObjectExists:
      return;  // the library handed out a handle the tool thought live: nothing the user did
    case Status::NullArgument:
      in.rule = Rule::ArgNull;
      std::snprintf(detail, sizeof detail, "attribute_val/flag");
      break;
    case Status::Reentrant:
      in.rule = Rule::CallbackReentrant;
      std::snprintf(detail, sizeof detail, "modifies the object whose attribute callback is running");
      break;
    case Status::AttrAbsent: in.rule = Rule::AttrDeleteAbsent; break;
    case Status::Finalized: in.rule = Rule::LifecycleAfterFinalize; break;
    default:
      return;  // Ok, callback failures (reported where the callback ran), capacity
  }
  in.detail = detail;
  report(in);
}

}  // namespace attrcheck::rt
