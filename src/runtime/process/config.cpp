// The runtime as the library's load makes it: the configuration (every flag declared once), the
// process state, and the engine built with the callbacks' invoker (create_state). Everything the
// runtime reads through state() may be the first to ask, before the load constructor runs.
#include "runtime/process/state.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/callbacks/invoker.hpp"
#include "runtime/hooks/hook_common.hpp"
#include "runtime/process/chain.hpp"
#include "runtime/process/call_counts.hpp"
#include "runtime/process/fast_state.hpp"
#include "runtime/process/portability.hpp"
#include "runtime/process/rank_report.hpp"

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
bool set_gather_timeout(Runtime& r, const char* v) {
  char* end = nullptr;
  const double seconds = std::strtod(v, &end);
  if (!*v || *end || !(seconds >= 0) || seconds > 86400) return false;
  r.gather_timeout_ms = static_cast<int>(seconds * 1000.0 + 0.5);
  return true;
}
bool set_output(Runtime& r, const char* v) {
  if (!*v || std::strlen(v) >= sizeof r.output_dir) return false;
  std::snprintf(r.output_dir, sizeof r.output_dir, "%s", v);
  return true;
}

bool set_portable_to(Runtime& r, const char* v) { return parse_portable_to(v, &r.portable_to); }

constexpr Flag kFlags[] = {
    {"ATTRCHECK_MODE", "shadow, emulate, off", set_mode},
    {"ATTRCHECK_ON_ERROR", "report, errhandler, abort", set_on_error},
    {"ATTRCHECK_OUTPUT", "a directory path", set_output},
    {"ATTRCHECK_STACK_DEPTH", "0..16 frames per stack", set_stack_depth},
    {"ATTRCHECK_RANK_SUMMARY", "1 or 0: each rank prints its summary on stderr", set_rank_summary},
    {"ATTRCHECK_PROVENANCE", "stack or site: what keyval creations and frees record", set_provenance},
    {"ATTRCHECK_SYMBOLIZE", "1 or 0: name the report's frames in the process at MPI_Finalize", set_symbolize},
    {"ATTRCHECK_PORTABLE_TO", nullptr, set_portable_to},
    {"ATTRCHECK_GATHER_TIMEOUT", "seconds a rank waits to gather the job's report at MPI_Finalize (0: every rank "
     "writes its own)", set_gather_timeout},
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
        std::fprintf(stderr, "attrcheck: %s='%s' is not valid (expected %s); using the default\n", f.env, v, f.values ? f.values : portable_to_values());
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
// The chain of PMPI tools is known then too (every preloaded module is loaded before the first
// constructor runs), and the report at exit is registered.
__attribute__((constructor)) void load_configuration() {
  create_state();
  resolve_chain();
  // Checked as mode=off, nothing (the report says why): a tool in front takes the calls, or the
  // program runs on another MPI library.
  if (front_takes_calls() || adopt_other_library(false)) g_off = true;
  install_exit_hook();
  install_at_exit();
}
}  // namespace

}  // namespace attrcheck::rt
