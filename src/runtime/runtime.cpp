// The runtime's state, configuration, provenance, findings and lifecycle (report on every exit
// path). Callbacks are in callbacks.cpp, the trampolines in trampolines.cpp, the per-op hooks in hooks.cpp.
#include "runtime/runtime.hpp"

#include "runtime/call_counts.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace attrcheck::rt {

namespace {

// ---- configuration: every flag declared once ---------------------------------------------------

struct Flag {
  const char* env;
  const char* values;  // accepted values, for the error message
  bool (*apply)(Runtime&, const char*);
};

bool set_mode(Runtime& r, const char* v) {
  if (!std::strcmp(v, "shadow")) return r.mode = Mode::Shadow, true;
  if (!std::strcmp(v, "emulate")) return r.mode = Mode::Emulate, true;
  if (!std::strcmp(v, "off")) return r.mode = Mode::Off, true;
  return false;
}
bool set_on_error(Runtime& r, const char* v) {
  if (!std::strcmp(v, "report")) return r.on_error = OnError::Report, true;
  if (!std::strcmp(v, "errhandler")) return r.on_error = OnError::Errhandler, true;
  if (!std::strcmp(v, "abort")) return r.on_error = OnError::Abort, true;
  return false;
}
bool set_stack_depth(Runtime& r, const char* v) {
  char* end = nullptr;
  const long depth = std::strtol(v, &end, 10);
  if (!*v || *end || depth < 0 || depth > kStackFrames) return false;
  r.findings.set_stack_depth(static_cast<int>(depth));
  return true;
}
bool set_rank_summary(Runtime& r, const char* v) {
  if (!std::strcmp(v, "1")) return r.rank_summary = true, true;
  if (!std::strcmp(v, "0")) return r.rank_summary = false, true;
  return false;
}
bool set_symbolize(Runtime& r, const char* v) {
  if (!std::strcmp(v, "1")) return r.symbolize = true, true;
  if (!std::strcmp(v, "0")) return r.symbolize = false, true;
  return false;
}
bool set_provenance(Runtime& r, const char* v) {
  if (!std::strcmp(v, "stack")) return r.provenance_stacks = true, true;
  if (!std::strcmp(v, "site")) return r.provenance_stacks = false, true;
  return false;
}
bool set_capacity(std::uint32_t* out, const char* v) {
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (!*v || *end || n < 1 || n > (1L << 22)) return false;
  *out = static_cast<std::uint32_t>(n);
  return true;
}
bool set_max_keyvals(Runtime& r, const char* v) { return set_capacity(&r.max_keyvals, v); }
bool set_max_objects(Runtime& r, const char* v) { return set_capacity(&r.max_objects, v); }
bool set_output(Runtime& r, const char* v) {
  if (!*v || std::strlen(v) >= sizeof r.output_dir) return false;
  std::snprintf(r.output_dir, sizeof r.output_dir, "%s", v);
  return true;
}

constexpr Flag kFlags[] = {
    {"ATTRCHECK_MODE", "shadow, emulate, off", set_mode},
    {"ATTRCHECK_ON_ERROR", "report, errhandler, abort", set_on_error},
    {"ATTRCHECK_OUTPUT", "a directory path", set_output},
    {"ATTRCHECK_STACK_DEPTH", "0..16 frames per stack", set_stack_depth},
    {"ATTRCHECK_RANK_SUMMARY", "1 or 0: each rank prints its summary on stderr", set_rank_summary},
    {"ATTRCHECK_PROVENANCE", "stack or site: what keyval creations and frees record", set_provenance},
    {"ATTRCHECK_SYMBOLIZE", "1 or 0: name the report's frames in the process at MPI_Finalize", set_symbolize},
    // Testing only: lower capacities, to test what happens at them (tool.limit) quickly.
    {"ATTRCHECK_MAX_KEYVALS", "1..4194304 keyvals the engine holds (testing)", set_max_keyvals},
    {"ATTRCHECK_MAX_OBJECTS", "1..4194304 objects the engine holds (testing)", set_max_objects},
};

const char* mode_name(Mode m) {
  return m == Mode::Shadow ? "shadow" : m == Mode::Emulate ? "emulate" : "off";
}
const char* on_error_name(OnError o) {
  return o == OnError::Report ? "report" : o == OnError::Errhandler ? "errhandler" : "abort";
}

}  // namespace

namespace {

// ---- exit paths --------------------------------------------------------------------------------

// Fatal signals, and the ones a launcher sends to stop a rank (mpirun sends SIGTERM to the
// other ranks after MPI_Abort): either way the report is written first.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
struct sigaction g_previous[sizeof kFatalSignals / sizeof kFatalSignals[0]];

// The instruction the signal hit, from the interrupted context (nullptr where not known).
const void* fault_pc(void* context) noexcept {
  if (!context) return nullptr;
  const auto& mc = static_cast<const ucontext_t*>(context)->uc_mcontext;
#if defined(__x86_64__)
  return reinterpret_cast<const void*>(mc.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<const void*>(mc.pc);
#else
  (void)mc;
  return nullptr;
#endif
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  Runtime& r = state();
  const bool fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
  if (const CbFrame* cb = t_state.ctx.cb_top; fault && cb && cb != &kUnchecked && cb != &kInFortran) {  // a callback crashed
    char detail[320];
    Appender a{detail, sizeof detail};
    a.put(cb->copy ? "copy callback " : "delete callback ");
    a.hex(reinterpret_cast<std::uintptr_t>(cb->fn));  // dladdr is not async-signal-safe
    a.put(" of keyval ");
    a.num(cb->keyval);
    a.put(" received signal ");
    a.num(sig);
    a.put(" during ");
    const char* const call = call_name_of(cb->call);
    a.put(call);
    FindingInput in;
    in.rule = Rule::CallbackCrash;
    in.call = call;
    in.site = cb->fn;
    in.site_is_entry = true;
    in.has_keyval = true;
    in.keyval = cb->keyval;
    in.detail = detail;
    // Where it crashed: the stack from the instruction the signal hit (the unwinder, warmed up at
    // MPI_Init, steps through the signal frame; what lies above it is this handler's own frames).
    void* frames[kStackFrames + 24];
    const int depth = capture_stack(frames, kStackFrames + 24, 0);
    const void* pc = fault_pc(context);
    for (int i = 0; pc && i < depth && !in.fault_stack; ++i) {
      if (frames[i] != pc) continue;
      in.fault_stack = frames + i;
      in.fault_stack_depth = depth - i;
    }
    if (pc && !in.fault_stack) {  // the unwinder did not get through: the instruction alone
      frames[0] = const_cast<void*>(pc);
      in.fault_stack = frames;
      in.fault_stack_depth = 1;
    }
    r.findings.record_async_signal_safe(in);
  }
  r.run.signal.store(sig, std::memory_order_relaxed);
  r.run.status.store("signal", std::memory_order_release);
  r.report.write(r.run, r.findings);
  if (r.rank_summary) render_summary(2, r.run, r.findings);
  // Hand the signal on: to the previous handler (Open MPI's backtrace printer), else the default.
  for (std::size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    if (kFatalSignals[i] != sig) continue;
    const struct sigaction& prev = g_previous[i];
    if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
      sigaction(sig, &prev, nullptr);
      prev.sa_sigaction(sig, info, context);
      return;
    }
    if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler) {
      sigaction(sig, &prev, nullptr);
      prev.sa_handler(sig);
      return;
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_signal_handlers() {
  warm_up_stack_capture();  // the fatal-signal handler's finding captures a stack
  for (std::size_t i = 0; i < sizeof kFatalSignals / sizeof kFatalSignals[0]; ++i) {
    struct sigaction sa{};
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(kFatalSignals[i], &sa, &g_previous[i]);
  }
}

void at_exit() {
  Runtime& r = state();
  if (r.mode == Mode::Off) return;
  if (phase() != Phase::Finalized) {
    if (phase() == Phase::BeforeInit && r.findings.size() == 0) return;  // never an MPI program
    const char* status = r.run.status.load();
    if (!std::strcmp(status, "running")) r.run.status.store("exit-without-finalize");
    write_report();
    print_summary();
    return;
  }
  if (r.findings.version() != r.written_version.load()) write_report();
}

bool prepare_report(Runtime& r, const char* name) {
  char error[256];
  if (r.report.prepare(r.output_dir, name, error, sizeof error)) return true;
  std::fprintf(stderr, "attrcheck: cannot write reports: %s\n", error);
  return false;
}

}  // namespace

// ---- state ------------------------------------------------------------------------------------

std::atomic<Runtime*> g_runtime{nullptr};
bool g_off = false;
bool g_shadow = false;
FastState g_fast;
const std::atomic<std::uint64_t> OwnerWord::kNever{OwnerWord::kNeverVersion};

Runtime& create_state() noexcept {
  // Never destroyed: it must outlive atexit handlers and late callbacks.
  static Runtime* r = [] {
    auto* rt = new Runtime;
    for (const Flag& f : kFlags) {
      const char* v = std::getenv(f.env);
      if (v && !f.apply(*rt, v))
        std::fprintf(stderr, "attrcheck: %s='%s' is not valid (expected %s); using the default\n", f.env, v, f.values);
    }
    std::snprintf(rt->run.mode, sizeof rt->run.mode, "%s", mode_name(rt->mode));
    std::snprintf(rt->run.on_error, sizeof rt->run.on_error, "%s", on_error_name(rt->on_error));
    rt->run.pid = static_cast<long>(::getpid());
    rt->run.call_counts = read_call_counts;
    EngineConfig config;
    config.keyval_invalid = MPI_KEYVAL_INVALID;
    config.null_handle[static_cast<int>(ObjectKind::Comm)] = handle(MPI_COMM_NULL);
    config.null_handle[static_cast<int>(ObjectKind::Type)] = handle(MPI_DATATYPE_NULL);
    config.null_handle[static_cast<int>(ObjectKind::Win)] = handle(MPI_WIN_NULL);
    config.invoker = new_invoker();
    config.max_keyvals = rt->max_keyvals;
    config.max_objects = rt->max_objects;
    rt->engine = new Engine(config);
    g_fast.version = rt->engine->version_counter();
    g_fast.layout = rt->engine->layout_counter();
    g_fast.fortran_values = rt->engine->fortran_values_flag();
    g_off = rt->mode == Mode::Off;
    g_shadow = rt->mode == Mode::Shadow;
    g_fast.pending_owner.set_mode(g_shadow, g_fast.version);
    return rt;
  }();
  g_runtime.store(r, std::memory_order_release);
  return *r;
}

namespace {
// Read the configuration when the library is loaded, before main and before any wrapper runs.
__attribute__((constructor)) void load_configuration() { create_state(); }
}  // namespace



// ---- provenance ---------------------------------------------------------------------------------

Origin origin_here(const Call& call) {
  Runtime& r = state();
  if (r.findings.stack_depth() == 0) return 0;
  if (!r.provenance_stacks) return origin_site(call);
  // From the wrapper's frame when it handed it over: the application's frames only.
  if (call.frame) return r.depot.capture_from(call.frame, call.caller, r.findings.stack_depth());
  return r.depot.capture(r.findings.stack_depth() + 8, 1);  // + frames of attrcheck itself, trimmed later
}

__thread SiteCache::Entry SiteCache::t_sites[SiteCache::kSize];

Origin SiteCache::miss(const void* site) {
  Runtime& r = state();
  if (r.findings.stack_depth() == 0 || !site) return 0;
  void* frame = const_cast<void*>(site);
  Entry& e = slot(site);
  e.origin = r.depot.intern(&frame, 1);
  e.site = site;
  return e.origin;
}

void add_provenance(FindingInput& in, ProvenanceStorage& storage, const char* what, Origin origin) {
  if (!origin || in.provenance_count >= kMaxProvenance) return;
  std::vector<void*>& frames = storage.frames[in.provenance_count];
  frames = state().depot.frames(origin);
  if (frames.empty()) return;
  ProvenanceInput& p = in.provenance[in.provenance_count++];
  p.what = what;
  p.frames = frames.data();
  p.depth = static_cast<int>(frames.size());
}

namespace {
// The predefined callbacks' names, as a keyval of that kind was given them.
const char* copy_callback_name(ObjectKind kind, const CopyCallback& c) noexcept {
  if (c.action == CopyAction::User) return nullptr;
  const bool dup = c.action == CopyAction::Dup;
  if (c.deprecated) return dup ? "MPI_DUP_FN" : "MPI_NULL_COPY_FN";
  switch (kind) {
    case ObjectKind::Comm: return dup ? "MPI_COMM_DUP_FN" : "MPI_COMM_NULL_COPY_FN";
    case ObjectKind::Type: return dup ? "MPI_TYPE_DUP_FN" : "MPI_TYPE_NULL_COPY_FN";
    case ObjectKind::Win: return dup ? "MPI_WIN_DUP_FN" : "MPI_WIN_NULL_COPY_FN";
  }
  return nullptr;
}

const char* delete_callback_name(ObjectKind kind, const DeleteCallback& d) noexcept {
  if (d.action == DeleteAction::User) return nullptr;
  if (d.deprecated) return "MPI_NULL_DELETE_FN";
  switch (kind) {
    case ObjectKind::Comm: return "MPI_COMM_NULL_DELETE_FN";
    case ObjectKind::Type: return "MPI_TYPE_NULL_DELETE_FN";
    case ObjectKind::Win: return "MPI_WIN_NULL_DELETE_FN";
  }
  return nullptr;
}
}  // namespace

void add_keyval_provenance(FindingInput& in, ProvenanceStorage& storage, int engine_key, bool freed) {
  KeyvalInfo info;
  if (!state().engine->keyval_info(engine_key, &info) || info.predefined) return;
  add_provenance(in, storage, "keyval created", info.created_at);
  if (freed) add_provenance(in, storage, "keyval freed", info.freed_at);
  // How it was made: what names a keyval whose functions have no names (a stripped library's).
  in.has_callbacks = true;
  in.callbacks.copy_name = copy_callback_name(info.spec.kind, info.spec.copy);
  in.callbacks.copy_fn = info.spec.copy.fn;
  in.callbacks.delete_name = delete_callback_name(info.spec.kind, info.spec.del);
  in.callbacks.delete_fn = info.spec.del.fn;
  in.callbacks.extra_state = info.spec.extra_state;
}

// ---- findings and errors ------------------------------------------------------------------------

void* fortran_pmpi(const char* name) noexcept { return dlsym(RTLD_DEFAULT, name); }

bool library_attr(ObjectKind kind, Handle h, int key, std::uint64_t* value, Binding lang) noexcept {
  if (lang != Binding::C) {
    // A Fortran-set value: read it as Fortran does (a C read would give a pointer to it).
    using Get = void (*)(MPI_Fint*, MPI_Fint*, MPI_Aint*, MPI_Fint*, MPI_Fint*);
    static const char* const names[] = {"pmpi_comm_get_attr_", "pmpi_type_get_attr_", "pmpi_win_get_attr_"};
    auto get = reinterpret_cast<Get>(fortran_pmpi(names[static_cast<int>(kind)]));
    if (!get) return false;
    MPI_Fint object = fortran_handle(kind, h), fkey = key, logical = 0, ierr = 0;
    MPI_Aint v = 0;
    get(&object, &fkey, &v, &logical, &ierr);
    if (ierr != MPI_SUCCESS || !logical) return false;
    if (value) *value = static_cast<std::uint64_t>(v);
    return true;
  }
  void* v = nullptr;
  int flag = 0;
  int rc;
  switch (kind) {
    case ObjectKind::Comm: rc = PMPI_Comm_get_attr(from_handle<MPI_Comm>(h), key, &v, &flag); break;
    case ObjectKind::Type: rc = PMPI_Type_get_attr(from_handle<MPI_Datatype>(h), key, &v, &flag); break;
    default: rc = PMPI_Win_get_attr(from_handle<MPI_Win>(h), key, &v, &flag); break;
  }
  if (rc != MPI_SUCCESS || !flag) return false;
  if (value) *value = reinterpret_cast<std::uintptr_t>(v);
  return true;
}

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
  r.findings.record(in);
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
  a.put(kProfile.name);
  a.put(" ");
  a.put(library_version());
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
  if (const KnownDivergence* known = known_divergence(site, in.call)) return library_note(*known);
  in.detail = detail;
  in.has_keyval = has_keyval;
  in.keyval = keyval;
  report(in);
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

int error_code(Result r, ObjectKind kind) noexcept {
  switch (error_class(r.status, kind)) {
    case ErrorClass::Success: return MPI_SUCCESS;
    case ErrorClass::Keyval: return MPI_ERR_KEYVAL;
    case ErrorClass::Arg: return MPI_ERR_ARG;
    case ErrorClass::Comm: return MPI_ERR_COMM;
    case ErrorClass::Type: return MPI_ERR_TYPE;
    case ErrorClass::Win: return MPI_ERR_WIN;
    case ErrorClass::Callback: return r.callback_rc ? r.callback_rc : MPI_ERR_OTHER;
    case ErrorClass::Other: return MPI_ERR_OTHER;
  }
  return MPI_ERR_OTHER;
}

namespace {
// Calls the error handler of the object, or of MPI_COMM_WORLD for calls without a live
// communicator or window (keyval calls, datatypes). `only_user`: skip the predefined handlers.
void call_errhandler(ObjectKind kind, Handle h, int code, bool only_user) {
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  if (kind == ObjectKind::Win && live_object(kind, h)) {
    MPI_Win win = from_handle<MPI_Win>(h);
    if (PMPI_Win_get_errhandler(win, &eh) != MPI_SUCCESS) return;
    const bool predefined = eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN;
    if (!only_user || !predefined) PMPI_Win_call_errhandler(win, code);
  } else {
    MPI_Comm comm = kind == ObjectKind::Comm && live_object(kind, h) ? from_handle<MPI_Comm>(h) : MPI_COMM_WORLD;
    if (PMPI_Comm_get_errhandler(comm, &eh) != MPI_SUCCESS) return;
    const bool predefined = eh == MPI_ERRORS_ARE_FATAL || eh == MPI_ERRORS_RETURN;
    if (!only_user || !predefined) PMPI_Comm_call_errhandler(comm, code);
  }
  if (eh != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&eh);
}
}  // namespace

int fail(const Call&, ObjectKind kind, Handle h, int code) {
  if (code == MPI_SUCCESS) return code;
  const Phase p = phase();
  if (p != Phase::Running && p != Phase::Finalizing) return code;  // no error handler exists
  switch (state().on_error) {
    case OnError::Report:
      call_errhandler(kind, h, code, /*only_user=*/true);
      return code;
    case OnError::Errhandler:
      state().run.status.store("errhandler");
      write_report();
      print_summary();
      call_errhandler(kind, h, code, /*only_user=*/false);
      state().run.status.store("running");
      return code;
    case OnError::Abort:
      state().run.status.store("aborted");
      write_report();
      print_summary();
      PMPI_Abort(MPI_COMM_WORLD, code);
      return code;
  }
  return code;
}

// ---- lifecycle ----------------------------------------------------------------------------------

void write_report() noexcept {
  Runtime& r = state();
  if (!r.report.ready()) {
    char name[64];
    std::snprintf(name, sizeof name, "pid-%ld.json", r.run.pid);
    if (!prepare_report(r, name)) return;
  }
  const std::uint64_t version = r.findings.version();
  if (!r.report.write(r.run, r.findings)) return;
  r.written_version.store(version);
  // The final report holds every finding: the journal has served (a later finding rewrites the
  // whole report, as after MPI_Finalize every finding does).
  if (phase() == Phase::Finalized) r.journal.finish(r.findings);
}

void start_journal() noexcept {
  Runtime& r = state();
  char path[1100];
  std::snprintf(path, sizeof path, "%s", r.report.path());
  const std::size_t n = std::strlen(path);
  if (n < 5 || std::strcmp(path + n - 5, ".json") != 0) return;
  std::snprintf(path + n - 5, sizeof path - (n - 5), ".journal");  // rank-3.json -> rank-3.journal
  if (!r.journal.start(path, r.run, r.findings))
    std::fprintf(stderr, "attrcheck: cannot write %s: findings are saved at exit only\n", path);
}

void print_summary() noexcept {
  if (state().rank_summary) render_summary(2, state().run, state().findings);
}

void started(int provided) {
  Runtime& r = state();
  r.thread_level = provided;
  // While one thread at a time calls, its sets may wait for the engine (fast_path.hpp); from
  // SERIALIZED whichever thread calls next applies them; at MULTIPLE a second thread calling ends
  // deferral (pending.cpp).
  // (Emulate mode defers the sets that run no callback the same way: set_path.hpp.)
  const bool defer = r.mode == Mode::Shadow || r.mode == Mode::Emulate;
  g_fast.share_pending = defer && provided >= MPI_THREAD_SERIALIZED;
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
  r.engine->create_object(ObjectKind::Comm, r.world, kObjectPredefined | kObjectWorld);
  r.engine->create_object(ObjectKind::Comm, r.self, kObjectPredefined | kObjectSelf);
  register_predefined_keys(*r.engine);

  // The report is named by rank (and spawned job) from now on; one written before MPI_Init
  // (pid-N.json) moves.
  const bool had_early = r.report.ready();
  char early[1024];
  std::snprintf(early, sizeof early, "%s", r.report.path());
  MPI_Comm parent = MPI_COMM_NULL;
  PMPI_Comm_get_parent(&parent);
  r.run.spawned = parent != MPI_COMM_NULL;
  find_job_identity(r.run.job, sizeof r.run.job);
  char name[160];
  report_file_name(r.run, name, sizeof name);
  if (prepare_report(r, name) && had_early) ::unlink(early);
  start_journal();
  r.phase.store(static_cast<int>(Phase::Running), std::memory_order_release);
  r.engine->advance_layout();
  g_fast.open.store(true, std::memory_order_release);
  install_signal_handlers();
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit(at_exit);
  }
}

}  // namespace attrcheck::rt
