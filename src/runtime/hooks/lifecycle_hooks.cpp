// The lifecycle hooks: MPI_Init, MPI_Finalize (the leak findings, the report) and MPI_Abort.
#include <cstdio>
#include <cstring>
#include <mutex>

#include "report/symbolize.hpp"
#include "runtime/hooks/hook_common.hpp"
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
  static const char* const levels[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED",
                                       "MPI_THREAD_MULTIPLE"};
  std::snprintf(r.run.thread_level, sizeof r.run.thread_level, "%s",
                provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE ? levels[provided] : "?");
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (PMPI_Get_library_version(version, &len) == MPI_SUCCESS) {
    version[sizeof version - 1] = '\0';
    if (char* nl = std::strchr(version, '\n')) *nl = '\0';
    if (char* comma = std::strchr(version, ',')) *comma = '\0';
    std::snprintf(r.run.mpi_library, sizeof r.run.mpi_library, "%.*s", static_cast<int>(sizeof r.run.mpi_library - 1), version);  // first line, clipped
    check_library(version);
  }
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
  }
}
}  // namespace

int on_init(const Call&, int, const FnRef<int(int*)>& forward) {
  // (The configuration was read when the library was loaded.)
  int provided = MPI_THREAD_SINGLE;
  const int rc = forward(&provided);
  if (rc == MPI_SUCCESS && phase() == Phase::BeforeInit) begin(provided);
  return rc;
}

bool adopt_library_start() noexcept {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (phase() != Phase::BeforeInit) return true;  // another thread adopted it meanwhile
  int initialized = 0, finalized = 0;
  if (PMPI_Initialized(&initialized) != MPI_SUCCESS || !initialized) return false;
  if (PMPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return false;
  int provided = MPI_THREAD_SINGLE;
  if (PMPI_Query_thread(&provided) != MPI_SUCCESS) provided = MPI_THREAD_SINGLE;
  begin(provided);
  return true;
}

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
  FinalizeOptions options;
  // Both modes do what the library does where the standard is silent (Open MPI 5 does not).
  options.delete_world_attributes = release_facts().world_attributes_deleted_at_finalize;
  options.after_self = world_attributes_left;
  options.context = const_cast<Call*>(&call);
  int rc;
  auto library_finalize = [&] {
    r.library_finalizing.store(true, std::memory_order_release);
    const int code = forward();
    r.library_finalizing.store(false, std::memory_order_release);
    return code;
  };
  if (r.mode == Mode::Emulate) {
    e.finalize(options);
    rc = library_finalize();
  } else {
    ReplayScope replay(call, false);
    replay.order_deletes_on(r.self);
    rc = library_finalize();
    e.finalize(options);
    replay.finish();
  }
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
  r.phase.store(static_cast<int>(Phase::Finalized), std::memory_order_release);
  r.run.status.store("finalized");
  // A normal end: the report's frames are named here, where their modules are loaded.
  if (r.symbolize) symbolize_findings(r.findings);
  write_report();
  print_summary();
  return rc;
}

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
