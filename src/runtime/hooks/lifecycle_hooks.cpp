// The lifecycle hooks: MPI_Init, MPI_Finalize (the leak findings, the report) and MPI_Abort.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "report/symbolize.hpp"
#include "runtime/hooks/hook_common.hpp"
#include "runtime/process/chain.hpp"
#include "runtime/process/gather.hpp"
#include "runtime/process/rank_report.hpp"
#include "runtime/python/python_frames.hpp"

namespace attrcheck::rt {

namespace {
// MPI runs at thread level `provided`: the runtime's state for it, the predefined objects and
// keyvals registered, the report named by rank, the fast paths opened.
void started(int provided) {
  Runtime& r = state();
  r.thread_level = provided;
  // While one thread at a time calls, its sets may wait for the engine (pending_sets.hpp); from
  // SERIALIZED whichever thread calls next applies them; at MULTIPLE a second thread calling ends
  // deferral (pending.cpp).
  // (Emulate mode defers the sets that run no callback the same way: set_path.hpp.)
  // In a program whose Python frames are read, a deferred set keeps its Python frames, taken when
  // it is deferred (by the time it is applied they are gone).
  python::init();
  if (const char* unread = python::unread_version(); unread[0]) {
    // A Python whose frames are not read: said once, at no call site (tool.python-frames).
    char detail[192];
    std::snprintf(detail, sizeof detail,
                  "Python %s: attrcheck reads the Python frames of Python %s only; this run's stacks have no "
                  "Python frames",
                  unread, python::read_versions());
    FindingInput in;
    in.rule = Rule::ToolPythonFrames;
    in.detail = detail;
    in.no_stack = true;
    report(in);
  }
  g_fast.python_sites = python::active();
  const bool defer = r.mode == Mode::Shadow || r.mode == Mode::Emulate;
  if (python::active() && r.provenance_stacks) {  // keyval provenance: with the Python frames
    r.provenance_python_stacks = true;
    r.provenance_stacks = false;
  }
  // (A Python program's at any level: record_pending<kOwn> then needs no test of python_sites.
  // Below SERIALIZED no other thread calls, so sharing them changes nothing but that.)
  g_fast.share_pending = defer && (provided >= MPI_THREAD_SERIALIZED || g_fast.python_sites);
  g_fast.gate_pending = defer && provided >= MPI_THREAD_MULTIPLE;
  // (At MULTIPLE this thread, the one that started MPI, owns the pending sets while it is the
  // only one calling: pending.cpp.)
  const bool deferring = defer && (!g_fast.gate_pending || hold_pending_owner());
  g_fast.defer_sets.store(deferring ? (g_shadow ? kDeferShadow : kDeferEmulate) : 0, std::memory_order_relaxed);
  r.world = handle(MPI_COMM_WORLD);
  r.self = handle(MPI_COMM_SELF);
  PMPI_Comm_rank(MPI_COMM_WORLD, &r.run.rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &r.run.size);
  // (By name, not as an index: the standard ABI's levels are 0, 1024, 2048 and 4096.)
  const char* level = provided == MPI_THREAD_SINGLE       ? "MPI_THREAD_SINGLE"
                      : provided == MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
                      : provided == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                      : provided == MPI_THREAD_MULTIPLE   ? "MPI_THREAD_MULTIPLE"
                                                          : "?";
  std::snprintf(r.run.thread_level, sizeof r.run.thread_level, "%s", level);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (PMPI_Get_library_version(version, &len) == MPI_SUCCESS) {
    version[sizeof version - 1] = '\0';
    if (char* nl = std::strchr(version, '\n')) *nl = '\0';
    if (char* comma = std::strchr(version, ',')) *comma = '\0';
    std::snprintf(r.run.mpi_library, sizeof r.run.mpi_library, "%.*s", static_cast<int>(sizeof r.run.mpi_library - 1), version);  // first line, clipped
    check_library(version);
  }
  // MPICH's keyvals are handles (0xa4400001): messages write them in hex, as its users know them.
  if (running_library() == Library::Mpich) set_keyvals_in_hex(true);
  std::snprintf(r.run.mpi_profile, sizeof r.run.mpi_profile, "%s", release().id);
  r.engine->create_object(ObjectKind::Comm, r.world, kObjectPredefined | kObjectWorld);
  r.engine->create_object(ObjectKind::Comm, r.self, kObjectPredefined | kObjectSelf);
  register_predefined_keys(*r.engine);
  report_as_rank();
  r.phase.store(static_cast<int>(Phase::Running), std::memory_order_release);
  r.engine->advance_layout();
  g_fast.open.store(true, std::memory_order_release);
  install_exit_paths();
}

// Shadow mode's moment at MPI_Finalize: the library deletes MPI_COMM_SELF's attributes first,
// newest first, while MPI still works. The runtime's own attribute there, set at MPI_Init before
// the program could set any, is deleted last: its delete callback runs once the program's
// MPI_COMM_SELF callbacks have, which is where the findings of MPI_Finalize are known and the
// job's report can still be gathered over MPI (on_finalize).
struct FinalizeWindow;
FinalizeWindow* g_window = nullptr;  // set during the library's MPI_Finalize
int g_self_keyval = MPI_KEYVAL_INVALID;
int at_self_deleted(MPI_Comm, int, void*, void*);

// The attribute is set in both modes, however MPI was started: its delete callback also tells
// the runtime that MPI_Finalize began when the call came past the wrapper (a tool loaded before
// attrcheck called PMPI_Finalize itself: finalize_unseen). Made through the library's own entry
// points, so no tool sees them.
void prepare_finalize(bool started_by_init) {
  // Adopted after the program's MPI_Init: MPI_COMM_SELF may hold attributes already, ours would
  // not be the last one deleted, and the ranks did not all start here together. Then every rank
  // writes its own report.
  if (started_by_init) prepare_gather();
  if (ATTRCHECK_LIBRARY(PMPI_Comm_create_keyval)(MPI_COMM_NULL_COPY_FN, at_self_deleted, &g_self_keyval, nullptr) != MPI_SUCCESS ||
      ATTRCHECK_LIBRARY(PMPI_Comm_set_attr)(MPI_COMM_SELF, g_self_keyval, nullptr) != MPI_SUCCESS)
    g_self_keyval = MPI_KEYVAL_INVALID;
}

// MPI is running, at thread level `provided`, and the calling thread is "the main thread".
void begin(int provided) {
  Runtime& r = state();
  r.first_thread.store(thread_token(), std::memory_order_relaxed);
  // Below MPI_THREAD_MULTIPLE calls never overlap (enter() refuses other threads below
  // SERIALIZED; SERIALIZED programs promise it): the engine and the keyval maps can do without
  // their locks.
  if (provided < MPI_THREAD_MULTIPLE) {
    r.engine->drop_locking();
    drop_keyval_locking();
  }
  started(provided);
}

// attr.world-at-finalize, on what is still set on MPI_COMM_WORLD once MPI_COMM_SELF's delete
// callbacks have run: a library whose MPI_COMM_SELF callback deletes its MPI_COMM_WORLD attribute
// itself (what Open MPI 5, which no longer deletes MPI_COMM_WORLD's attributes at finalize, asks
// of its users) does not rely on MPI_Finalize for it.
void world_attributes_left(void* context) {
  const Call& call = *static_cast<const Call*>(context);
  Runtime& r = state();
  for (const AttributeInfo& a : r.engine->attributes(ObjectKind::Comm, r.world)) {
    if (a.predefined || a.delete_action != DeleteAction::User) continue;
    FindingInput in = finding(Rule::AttrWorldAtFinalize, call);
    const KeyRecord* rec = record_for(a.keyval);
    in.has_keyval = true;
    in.keyval = rec ? rec->user_id : a.keyval;
    ProvenanceStorage storage;  // the site is MPI_Finalize's: say whose attribute it is
    add_provenance(in, storage, "attribute set", a.set_at);
    add_keyval_provenance(in, storage, a.keyval, false);
    report(in);
    // Whether its delete callback runs at all is the library's choice: both modes do what this
    // one does (finalize_options).
    depended_on(Question::WorldDeletedAtFinalize, in, release_facts().world_attributes_deleted_at_finalize,
                "MPI_Finalize runs this attribute's delete callback on MPI_COMM_WORLD",
                "MPI_Finalize leaves MPI_COMM_WORLD's attributes: this delete callback never runs");
  }
}
}  // namespace

int on_init(const Call&, int, const FnRef<int(int*)>& forward) {
  // (The configuration was read when the library was loaded.)
  int provided = MPI_THREAD_SINGLE;
  if (adopt_other_library(true)) {  // (opened since: the wrappers now pass every call there)
    g_off = true;
    return forward(&provided);
  }
  const int rc = forward(&provided);
  if (rc == MPI_SUCCESS && phase() == Phase::BeforeInit) {
    begin(provided);
    prepare_finalize(true);
  }
  return rc;
}

// A run the tool adopts was started past the wrapper: its finalize is learned from the
// MPI_COMM_SELF attribute (prepare_finalize).
namespace {
void adopted(int provided) {
  begin(provided);
  prepare_finalize(false);
}
}  // namespace

bool adopt_library_start() noexcept {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (phase() != Phase::BeforeInit) return true;  // another thread adopted it meanwhile
  int initialized = 0, finalized = 0;
  if (PMPI_Initialized(&initialized) != MPI_SUCCESS || !initialized) return false;
  if (PMPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return false;
  int provided = MPI_THREAD_SINGLE;
  if (PMPI_Query_thread(&provided) != MPI_SUCCESS) provided = MPI_THREAD_SINGLE;
  adopted(provided);
  return true;
}

namespace {

// The findings only MPI_Finalize can make: keyvals never freed, attributes left on objects.
void leak_findings(const Call& call) {
  Runtime& r = state();
  Engine& e = *r.engine;
  for (const KeyvalInfo& k : e.leaked_keyvals()) {
    FindingInput in = finding(Rule::KeyvalLeak, call);
    const KeyRecord* rec = record_for(k.id);
    in.has_keyval = true;
    in.keyval = rec ? rec->user_id : k.id;
    ProvenanceStorage storage;
    add_provenance(in, storage, "keyval created", k.created_at);
    report(in);
  }
  for (const AttributeInfo& a : e.attributes()) {
    if (a.predefined || a.delete_action != DeleteAction::User) continue;
    if (a.kind == ObjectKind::Comm && (a.object == r.world || a.object == r.self)) continue;
    FindingInput in = finding(Rule::AttrLeak, call);
    const KeyRecord* rec = record_for(a.keyval);
    in.has_keyval = true;
    in.keyval = rec ? rec->user_id : a.keyval;
    in.has_object = true;
    in.kind = a.kind;
    in.object = a.object;
    ProvenanceStorage storage;
    add_provenance(in, storage, "attribute set", a.set_at);
    add_provenance(in, storage, "object created", a.object_created_at);
    report(in);
  }
}

// Whether the library's MPI_Finalize is still to run delete callbacks of the program's after
// MPI_COMM_SELF's (on MPI_COMM_WORLD): one of them may free a keyval or an object, so the leaks
// are known only after it.
bool world_callbacks_pending() {
  Runtime& r = state();
  if (!release_facts().world_attributes_deleted_at_finalize) return false;
  for (const AttributeInfo& a : r.engine->attributes(ObjectKind::Comm, r.world))
    if (!a.predefined && a.delete_action == DeleteAction::User) return true;
  return false;
}

// What the engine's finalize does for MPI_Finalize `call`: both modes do what the library does
// where the standard is silent (Open MPI 5 does not delete MPI_COMM_WORLD's attributes), and
// attr.world-at-finalize is looked for once MPI_COMM_SELF's delete callbacks have run.
FinalizeOptions finalize_options(const Call& call) {
  FinalizeOptions options;
  options.delete_world_attributes = release_facts().world_attributes_deleted_at_finalize;
  options.after_self = world_attributes_left;
  options.context = const_cast<Call*>(&call);
  return options;
}

// Calls made without the GIL that got no Python frames (python::released_unread): said once, at
// no call site, at MPI_Finalize (tool.python-frames).
void note_python_released() {
  char why[160];
  if (!python::released_unread(why, sizeof why)) return;
  char detail[320];
  std::snprintf(detail, sizeof detail,
                "Python %s: calls made without the GIL have no Python frames in this run (%s); calls made "
                "holding it have them",
                python::version(), why);
  FindingInput in;
  in.rule = Rule::ToolPythonFrames;
  in.detail = detail;
  in.no_stack = true;
  report(in);
}

struct FinalizeWindow {
  const Call* call;
  FinalizeOptions options;
  bool ran = false;           // the SELF step and what follows it were done in the window
  bool leaks_done = false;
  bool gathered = false;
};

// The findings are complete up to here: the job's report is gathered now (gather.hpp).
bool gather_now() {
  Runtime& r = state();
  r.run.status.store("finalized");
  const bool gathered = gather_job_report();
  if (!gathered) r.run.status.store("running");  // (set for real once MPI_Finalize is done)
  return gathered;
}

void finalize_unseen(bool in_library);

int at_self_deleted(MPI_Comm, int, void*, void*) {
  FinalizeWindow* w = g_window;
  if (!w && phase() == Phase::Running) finalize_unseen(true);  // MPI_Finalize came past the wrapper
  if (!w || w->ran) return MPI_SUCCESS;
  w->ran = true;
  Runtime& r = state();
  FinalizeOptions self = w->options;
  self.world_step = false;
  r.engine->finalize(self);
  if (!world_callbacks_pending()) {
    leak_findings(*w->call);
    w->leaks_done = true;
  }
  w->gathered = gather_now();
  return MPI_SUCCESS;
}

}  // namespace

int on_finalize(const Call& call, const FnRef<int()>& forward) {
  settle();
  Runtime& r = state();
  if (phase() != Phase::Running) return forward();
  CallScope scope(call);
  Engine& e = *r.engine;
  g_fast.open.store(false, std::memory_order_release);
  r.engine->advance_layout();  // every remembered query is void
  r.phase.store(static_cast<int>(Phase::Finalizing), std::memory_order_release);
  if (r.mode == Mode::Shadow) release_quarantine();  // the library frees the keyvals held back
  // MPI_Finalize's findings go into the job's report in a moment (or this rank's own, if the
  // gather cannot take them): no file for them meanwhile, on every rank at once. A signal still
  // writes the rank's report.
  if (gather_prepared()) r.journal.hold(true);
  note_unchecked();  // (in the report the gather makes)
  note_python_released();
  FinalizeWindow window{&call, finalize_options(call)};
  FinalizeOptions& options = window.options;
  int rc;
  auto library_finalize = [&] {
    r.library_finalizing.store(true, std::memory_order_release);
    const int code = forward();
    r.library_finalizing.store(false, std::memory_order_release);
    return code;
  };
  if (r.mode == Mode::Emulate) {
    // The runtime runs every callback of the program's itself: all is known before the library's
    // finalize.
    e.finalize(options);
    leak_findings(call);
    window.leaks_done = window.ran = true;
    window.gathered = gather_now();
    rc = library_finalize();
  } else {
    ReplayScope replay(call, false);
    replay.order_deletes_on(r.self);
    g_window = g_self_keyval != MPI_KEYVAL_INVALID && gather_prepared() ? &window : nullptr;
    rc = library_finalize();
    g_window = nullptr;
    if (window.ran) {  // MPI_COMM_SELF was done in the window: MPI_COMM_WORLD's step now
      FinalizeOptions world = options;
      world.self_step = false;
      e.finalize(world);
    } else {
      e.finalize(options);
    }
    replay.finish();
  }
  if (!window.leaks_done) leak_findings(call);
  r.phase.store(static_cast<int>(Phase::Finalized), std::memory_order_release);
  r.run.status.store("finalized");
  if (window.gathered) {
    // In the job's report. What was found since (the library's finalize ran more of the
    // program's callbacks, or the leaks were known only after it) goes in a report of this
    // rank's own, which says what the job's report holds already.
    r.journal.finish(r.findings);
    if (r.findings.version() == r.gathered_version) {
      r.written_version.store(r.findings.version());
      start_journal(false);  // armed: a finding after this (at exit) is still on disk
      print_summary();
      return rc;
    }
  }
  // A normal end: the report's frames are named here, where their modules are loaded.
  if (r.symbolize) symbolize_findings(r.findings);
  write_report();
  print_summary();
  return rc;
}

namespace {

const Api kFinalizeUnseen{"MPI_Finalize", ObjectKind::Comm, nullptr};
bool g_leaks_deferred = false;  // finalize_unseen: MPI_COMM_WORLD's callbacks were still to run

// MPI_Finalize reached the library past attrcheck's wrapper (a tool in front of it called
// PMPI_Finalize): in_library, from the delete callback of the runtime's MPI_COMM_SELF attribute,
// where MPI still works; otherwise at exit, MPI finalized and that callback never run. The
// findings of MPI_Finalize are made as on_finalize makes them; emulate mode runs the program's
// MPI_COMM_SELF (and, where the library does, MPI_COMM_WORLD) delete callbacks here, as the
// library would have at this point. Each rank writes its own report (the ranks' reports are
// merged by the launcher).
void finalize_unseen(bool in_library) {
  settle();
  Runtime& r = state();
  const Call call{&kFinalizeUnseen, nullptr};
  CallScope scope(call);
  g_fast.open.store(false, std::memory_order_release);
  r.engine->advance_layout();
  r.phase.store(static_cast<int>(Phase::Finalizing), std::memory_order_release);
  if (in_library) r.library_finalizing.store(true, std::memory_order_release);
  if (r.mode == Mode::Shadow && in_library) release_quarantine();
  if (r.mode == Mode::Emulate && in_library) {
    r.engine->finalize(finalize_options(call));
  } else {
    // Shadow mode: the library runs the program's callbacks; the model keeps what it saw of them.
    world_attributes_left(const_cast<Call*>(&call));
  }
  g_leaks_deferred = in_library && r.mode == Mode::Shadow && world_callbacks_pending();
  if (!g_leaks_deferred) leak_findings(call);
  write_report();
}

// The run as the report must say it at exit, when attrcheck did not see MPI end (or start).
// True: write the report even if it holds no finding (MPI ran in this process).
bool exit_unseen() {
  Runtime& r = state();
  const Phase p = phase();
  if (p == Phase::Finalized) return false;
  int initialized = 0, finalized = 0;  // (of the library the program runs on: other_library)
  ATTRCHECK_LIBRARY(PMPI_Initialized)(&initialized);
  ATTRCHECK_LIBRARY(PMPI_Finalized)(&finalized);
  if (!initialized) return false;  // never an MPI program here
  if (p == Phase::BeforeInit) {
    // MPI ran, and the runtime saw none of its calls: named by the launcher's rank variables.
    if (const char* rank = launcher_rank()) r.run.rank = std::atoi(rank);
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
      if (const char* size = std::getenv(v)) {
        r.run.size = std::atoi(size);
        break;
      }
    note_unchecked();
    r.run.status.store(finalized ? "finalized" : "exit-without-finalize");
    return true;
  }
  if (!finalized) return false;  // an exit without MPI_Finalize, as when the tool is alone
  if (p == Phase::Running) finalize_unseen(false);
  if (g_leaks_deferred) {
    g_leaks_deferred = false;
    leak_findings(Call{&kFinalizeUnseen, nullptr});
  }
  note_unchecked();
  r.phase.store(static_cast<int>(Phase::Finalized), std::memory_order_release);
  r.run.status.store("finalized");
  if (r.symbolize) symbolize_findings(r.findings);
  return true;
}

}  // namespace

void note_unchecked() {
  static std::atomic<bool> noted{false};
  char detail[640];
  Rule rule = Rule::ToolBypassed;
  if (noted.load()) return;
  if (!bypassed(detail, sizeof detail)) {
    if (!other_library(detail, sizeof detail)) return;
    rule = Rule::ToolOtherMpi;
  }
  if (noted.exchange(true)) return;
  FindingInput in;
  in.rule = rule;
  in.detail = detail;
  in.no_stack = true;
  report(in);
}

void install_exit_hook() { g_exit_hook = exit_unseen; }

int on_abort(const Call& call, Handle, int, const FnRef<int()>& forward) {
  settle();
  Runtime& r = state();
  CallScope scope(call);
  r.run.status.store("aborted");
  write_report();
  print_summary();
  return forward();
}

}  // namespace attrcheck::rt
