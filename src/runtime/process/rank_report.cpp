// The rank's report (see rank_report.hpp): named, written on every exit path, the journal beside
// it and the summary on stderr.
#include "runtime/process/rank_report.hpp"

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/process/state.hpp"
#include "runtime/process/thread_state.hpp"
#include "runtime/process/chain.hpp"

namespace attrcheck::rt {

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
  if (const CbFrame* cb = t_state.ctx.cb_top;
      fault && cb && cb != &kUnchecked && cb != &kInFortran && cb->fn != kChainFrame) {  // a callback crashed
    char detail[320];
    Appender a{detail, sizeof detail};
    a.put(cb->copy ? "copy callback " : "delete callback ");
    a.hex(reinterpret_cast<std::uintptr_t>(cb->fn));  // dladdr is not async-signal-safe
    a.put(" of keyval ");
    a.keyval(cb->keyval);
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
  if (g_exit_hook && g_exit_hook()) {
    write_report();
    print_summary();
    return;
  }
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

void start_journal(bool now) noexcept {
  Runtime& r = state();
  char path[1100];
  std::snprintf(path, sizeof path, "%s", r.report.path());
  const std::size_t n = std::strlen(path);
  if (n < 5 || std::strcmp(path + n - 5, ".json") != 0) return;
  std::snprintf(path + n - 5, sizeof path - (n - 5), ".journal");  // rank-3.json -> rank-3.journal
  if (!r.journal.start(path, r.run, r.findings, now))
    std::fprintf(stderr, "attrcheck: cannot write %s: findings are saved at exit only\n", path);
}

const char* launcher_rank() noexcept {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* rank = std::getenv(v)) return rank;
  return nullptr;
}

void print_summary() noexcept {
  if (state().rank_summary) render_summary(2, state().run, state().findings);
}

void report_as_rank() {
  Runtime& r = state();
  const bool had_early = r.report.ready();
  char early[1024];
  std::snprintf(early, sizeof early, "%s", r.report.path());
  MPI_Comm parent = MPI_COMM_NULL;
  ATTRCHECK_LIBRARY(PMPI_Comm_get_parent)(&parent);
  r.run.spawned = parent != MPI_COMM_NULL;
  find_job_identity(r.run.job, sizeof r.run.job);
  char name[160];
  report_file_name(r.run, name, sizeof name);
  if (prepare_report(r, name) && had_early) ::unlink(early);
  start_journal(true);  // (findings made before MPI_Init are on disk at once)
}

bool (*g_exit_hook)() = nullptr;

void install_at_exit() {
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit(at_exit);
  }
}

void install_exit_paths() {
  install_signal_handlers();
  install_at_exit();
}

}  // namespace attrcheck::rt
