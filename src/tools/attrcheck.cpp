// attrcheck: run an MPI program under the attribute-caching checker (see usage below).
// Preloads the runtime into the command's processes, waits for the command, then merges the
// ranks' reports (in this process: the report library) and prints the summary.
#include "runtime/profile/mpi_profile_table.hpp"
#include "merge/load.hpp"
#include "merge/merge.hpp"
#include "tools/report/outputs.hpp"
#include "merge/suppress.hpp"
#include "probe.hpp"
#include "tools/elf_needed.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

using namespace attrcheck::reports;
using attrcheck::tools::elf_needed;

namespace {

constexpr const char* kDescription = R"(attrcheck: run an MPI program under the attribute-caching checker.

usage: attrcheck [options] -- COMMAND [ARGS...]

Typical uses:
  attrcheck -- mpirun -np 4 ./app        preload into every rank mpirun starts (locally)
  mpirun -np 4 attrcheck -- ./app        each rank preloads itself (no -x needed)
  attrcheck --probe-library [-- mpiexec -n]
                                         ask the MPI library what it does where libraries
                                         differ, and compare with attrcheck's profile of it)";

constexpr const char* kFooter = R"(exit status: the command's own status if it failed (signals as 128+N); if it exited 0
although a rank's own report says it crashed (signal N), 128+N, or every rank was killed
before it could write its report, 137; otherwise, unless --fail-on never: 4 if no rank wrote
a report (attrcheck was not loaded in the ranks: an LD_PRELOAD the command sets replaced it,
or the command started no MPI program), 3 if the run was not checked: a PMPI tool loaded
before attrcheck kept the calls from it (tool.bypassed), or the program runs on another MPI
library than attrcheck is built for (tool.other-mpi); 1 if findings at or above --fail-on were
reported; otherwise 0. Errors in attrcheck's own arguments exit 2.)";

// The exit statuses of a run attrcheck could not check (kFooter).
constexpr int kExitUnchecked = 3, kExitNotLoaded = 4;

const char* const kRankEnv[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "attrcheck: error: %s\nattrcheck: see 'attrcheck --help'\n", message.c_str());
  std::exit(2);
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

struct Options {
  std::string mode = env_or("ATTRCHECK_MODE", "shadow");
  std::string output = env_or("ATTRCHECK_OUTPUT", "attrcheck-out");
  std::string on_error = env_or("ATTRCHECK_ON_ERROR", "report");
  std::string fail_on = "error";
  std::string suppressions = env_or("ATTRCHECK_SUPPRESSIONS", "");
  std::string stack_depth = env_or("ATTRCHECK_STACK_DEPTH", "16");
  std::string provenance = env_or("ATTRCHECK_PROVENANCE", "stack");
  std::string portable_to = env_or("ATTRCHECK_PORTABLE_TO", "");
  bool no_default_suppressions = false;
  bool probe_library = false;
  std::string profile;  // --probe-library: the release profile to compare with
  std::string preload_first;  // libraries to preload before attrcheck (a :-list)
};

const std::map<std::string, std::vector<std::string>>& choices() {
  static const std::map<std::string, std::vector<std::string>> c = {
      {"--mode", {"shadow", "emulate", "off"}},
      {"--on-error", {"report", "errhandler", "abort"}},
      {"--fail-on", {"error", "warning", "info", "never"}},
      {"--provenance", {"stack", "site"}}};
  return c;
}

// The options before the command, and the command: after "--", or from the first argument that
// is not an option (nor an option's value).
std::vector<std::string> parse(int argc, char** argv, Options& o) {
  static const char* const kValued[] = {"--mode", "--output", "--on-error", "--fail-on", "--suppressions",
                                        "--stack-depth", "--provenance", "--portable-to", "--profile", "--preload-first"};  // (help: below)
  static const char* const kFlags[] = {"--no-default-suppressions", "--probe-library", "-h", "--help", "--version"};
  std::vector<std::string> options, command;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // no '--': the command starts at the first non-option
    std::string name = arg.substr(0, arg.find('='));
    bool valued = std::find(std::begin(kValued), std::end(kValued), name) != std::end(kValued);
    bool flag = std::find(std::begin(kFlags), std::end(kFlags), arg) != std::end(kFlags);
    if (!valued && !flag) die("unknown option '" + arg + "'");
    options.push_back(arg);
    if (valued && name == arg) {
      if (i + 1 >= argc) die(name + " needs a value");
      options.push_back(argv[++i]);
    }
  }
  for (; i < argc; ++i) command.emplace_back(argv[i]);

  CLI::App app(kDescription, "attrcheck");
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("attrcheck ") + ATTRCHECK_VERSION);
  struct Valued {
    const char* name;
    std::string* value;
    const char* type;
    const char* help;
  };
  const Valued valued[] = {
      {"--mode", &o.mode, "MODE",
       "shadow (default): forward every call to MPI and cross-check it;\n"
       "emulate: attrcheck's cache serves all user keyvals and attributes;\n"
       "off: pass-through (overhead baseline)\n(environment: ATTRCHECK_MODE)"},
      {"--output", &o.output, "DIR",
       "where per-rank reports and the merged DIR/report.json go\n"
       "(default: ./attrcheck-out)\n(environment: ATTRCHECK_OUTPUT)"},
      {"--on-error", &o.on_error, "POLICY",
       "what an erroneous call does after it is reported:\n"
       "report (default): it is not passed on and returns the error class\n"
       "the standard prescribes (a user-defined error handler is still called);\n"
       "errhandler: the object's error handler is invoked (the default one\n"
       "aborts) once the report is on disk; abort: report, then MPI_Abort\n"
       "(environment: ATTRCHECK_ON_ERROR)"},
      {"--fail-on", &o.fail_on, "SEVERITY",
       "exit non-zero if findings at or above SEVERITY exist:\n"
       "error (default), warning, info, never"},
      {"--suppressions", &o.suppressions, "FILE",
       "findings to leave out of the merged report, the summary and the\n"
       "gate (kept in it as suppressed counts); lines \"RULE_GLOB KIND:GLOB\",\n"
       "KIND fun, lib, src or at (see README, Suppressions)\n"
       "(environment: ATTRCHECK_SUPPRESSIONS)"},
      {"--stack-depth", &o.stack_depth, "N", "frames recorded per stack, 0..16 (default 16)\n(environment: ATTRCHECK_STACK_DEPTH)"},
      {"--portable-to", &o.portable_to, "SERIES,...",
       "release series the program must behave the same on (all, or ids\n"
       "such as openmpi-5.0,mpich-4.2: see --probe-library's profiles):\n"
       "the portability findings that concern them are warnings, not info\n"
       "(environment: ATTRCHECK_PORTABLE_TO)"},
      {"--provenance", &o.provenance, "WHAT",
       "what keyval creations and frees record for findings: stack\n"
       "(default: the whole stack, a few microseconds each) or site (the\n"
       "call site only, near free)\n(environment: ATTRCHECK_PROVENANCE)"},
  };
  for (const Valued& v : valued) app.add_option(v.name, *v.value, v.help)->type_name(v.type);
  app.add_option("--preload-first", o.preload_first,
                 "preload these libraries (a :-list) before attrcheck, for\n"
                 "a PMPI tool that must be first; attrcheck's library goes\n"
                 "before the environment's LD_PRELOAD otherwise (README:\n"
                 "With other tools)")
      ->type_name("LIBS");
  app.add_flag("--no-default-suppressions", o.no_default_suppressions,
               "do not apply the default suppressions shipped with attrcheck\n"
               "(lib/attrcheck/default.supp: benign patterns of well-known libraries)");
  app.add_flag("--probe-library", o.probe_library,
               "run the library probes natively (started with the command after\n"
               "'--', default: the build's launcher with -n 2) and print their\n"
               "answers beside the profile of the library's release; exit 1 if\n"
               "any differ");
  app.add_option("--profile", o.profile,
                 "with --probe-library: compare with this release profile\n"
                 "(openmpi-4.1, openmpi-5.0, openmpi-6.0, mpich-4.0, mpich-4.2,\n"
                 "mpich-5.0) instead")
      ->type_name("ID");
  app.get_formatter()->column_width(28);
  std::vector<std::string> args(options.rbegin(), options.rend());  // CLI11 parses a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::Success& e) {
    std::exit(app.exit(e));
  } catch (const CLI::ParseError& e) {
    die(e.what());
  }
  for (const auto& [name, allowed] : choices()) {
    const std::string& value = name == "--mode" ? o.mode : name == "--on-error" ? o.on_error
                               : name == "--fail-on" ? o.fail_on : o.provenance;
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      die(name + " must be one of " + list + " (got '" + value + "')");
    }
  }
  if (o.output.empty()) die("--output must not be empty");
  if (o.stack_depth.empty() || o.stack_depth.size() > 4 ||
      o.stack_depth.find_first_not_of("0123456789") != std::string::npos || std::stoi(o.stack_depth) > 16)
    die("--stack-depth must be a number of frames from 0 to 16 (got '" + o.stack_depth + "')");
  unsigned portable = 0;
  if (const char* bad = o.portable_to.empty() ? nullptr : attrcheck::rt::parse_release_list(o.portable_to.c_str(), &portable)) {
    std::string list;
    for (const attrcheck::rt::ReleaseProfile& r : attrcheck::rt::kReleases)
      if (r.library != attrcheck::rt::Library::Unknown) list += std::string(list.empty() ? "" : ", ") + r.id;
    die("--portable-to: '" + std::string(bad, std::strcspn(bad, ",")) + "' is no release series (all, or any of " +
        list + ")");
  }
  if (!o.profile.empty() && !o.probe_library) die("--profile goes with --probe-library");
  if (command.empty() && !o.probe_library) die("no command given (usage: attrcheck [options] -- COMMAND...)");
  return command;
}

// os.path.abspath: absolute and normalized (no '.', '..' or repeated '/').
std::string absolute(const std::string& path) {
  std::string full = path;
  if (path.empty() || path[0] != '/') {
    char cwd[4096];
    full = std::string(::getcwd(cwd, sizeof cwd) ? cwd : ".") + "/" + path;
  }
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= full.size()) {
    std::size_t j = full.find('/', i);
    if (j == std::string::npos) j = full.size();
    std::string part = full.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

void make_dirs(const std::string& dir) {
  for (std::size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/') continue;
    std::string prefix = dir.substr(0, i);
    if (::mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) die("cannot create " + dir + ": " + std::strerror(errno));
  }
  if (!is_dir(dir)) die("cannot create " + dir + ": " + std::strerror(ENOTDIR));
}

volatile sig_atomic_t g_child = 0;

extern "C" void forward(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

// Runs the command with every inherited descriptor left open: MPICH's Hydra passes each rank its
// PMI connection as one (PMI_FD), and the rank started under `mpiexec ... attrcheck -- app` must
// get it. Interrupts are passed on to the command (mpirun then stops its ranks).
int run(const std::vector<std::string>& command, const std::map<std::string, std::string>& env, long* child) {
  std::vector<std::string> entries;
  for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const auto& a : command) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  pid_t pid;
  int rc = ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), envp.data());
  if (rc != 0) die("cannot run " + command[0] + ": " + std::strerror(rc));
  g_child = pid;
  *child = static_cast<long>(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) die(std::string("cannot wait for the command: ") + std::strerror(errno));
  }
  g_child = 0;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// What a run whose command exited 0 ends with when the ranks' own reports say it failed (0 if
// they do not): a rank that crashed (its report says which fault signal ended it: SIGSEGV, SIGBUS,
// SIGILL, SIGFPE or SIGABRT), 128+N; every rank killed before it could write its report (only
// their journals are left, still "running": SIGKILL is the one signal no handler sees, and none
// of them ended by itself), 128+SIGKILL. The MPI launcher can lose that: MPICH 4.2.1's mpiexec
// (Hydra) exits 0 when two ranks end abnormally at once (pmodels/mpich#7057, fixed after 4.2.1).
// A rank stopped by SIGTERM, or killed while another ended normally, is left to the launcher:
// that is how launchers stop the other ranks of a job (Hydra kills them with SIGKILL once one
// rank exits without MPI_Finalize, and exits 0).
int abnormal_end(const Json& merged) {
  const Json* ranks = member(merged, "ranks");
  if (!ranks || !ranks->is_array() || ranks->empty()) return 0;
  auto who = [](const Json& r) {
    const std::string job = job_of(r);
    return std::string(member(r, "ranks") ? "ranks " : "rank ") + entry_ranks_text(r) +
           (job.empty() ? "" : " of spawned job " + job);
  };
  bool all_killed = true;
  for (const Json& r : *ranks) {
    const std::string status = text(r, "status");
    all_killed = all_killed && status == "running";
    if (status != "signal") continue;
    const long long sig = integer(r, "signal", 0);
    if (sig != SIGSEGV && sig != SIGBUS && sig != SIGILL && sig != SIGFPE && sig != SIGABRT) continue;
    std::fprintf(stderr, "attrcheck: the command exited 0, but %s crashed: its report says signal %lld ended it\n",
                 who(r).c_str(), sig);
    return static_cast<int>(128 + sig);
  }
  if (!all_killed) return 0;
  std::fprintf(stderr, "attrcheck: the command exited 0, but every rank was killed before it could write its "
               "report (their journals are all they left)\n");
  return 128 + SIGKILL;
}

// The gating finding that says the run was not checked (tool.bypassed, tool.other-mpi), or null.
const Json* unchecked(const std::vector<const Json*>& gating) {
  for (const Json* f : gating)
    if (text(*f, "rule") == "tool.bypassed" || text(*f, "rule") == "tool.other-mpi") return f;
  return nullptr;
}

// No rank wrote a report: says why it may be. An LD_PRELOAD that the command passes its ranks
// itself (mpirun -x LD_PRELOAD=..., mpiexec -genv LD_PRELOAD ...) replaces the one attrcheck set.
void not_loaded(const std::string& output, const std::vector<std::string>& command) {
  std::string setting;
  for (std::size_t i = 0; i < command.size() && setting.empty(); ++i)
    if (command[i].rfind("LD_PRELOAD", 0) == 0 && i > 0) setting = command[i - 1] + " " + command[i];
  if (!setting.empty()) {
    std::fprintf(stderr,
                 "attrcheck: no rank wrote a report to %s: the command sets the ranks' LD_PRELOAD itself (%s), "
                 "which replaces the one attrcheck set, so attrcheck was not loaded. Leave LD_PRELOAD to "
                 "attrcheck (LD_PRELOAD=TOOL attrcheck -- ... runs TOOL after it; --preload-first TOOL "
                 "before it)\n",
                 output.c_str(), setting.c_str());
    return;
  }
  std::fprintf(stderr,
               "attrcheck: no rank wrote a report to %s: attrcheck was not loaded in the ranks (does the "
               "command set LD_PRELOAD for them?), or the command started no MPI program\n",
               output.c_str());
}

// Whether a program the command names (an argument that is an ELF file, by path or found in
// PATH: `mpiexec -n 2 ./app`, `attrcheck -- ./app`) needs the MPI standard ABI's libmpi_abi.so.1.
bool runs_standard_abi(const std::vector<std::string>& command) {
  const char* path_env = std::getenv("PATH");
  const std::string search = path_env ? path_env : "/usr/bin:/bin";
  for (const std::string& arg : command) {
    if (arg.empty() || arg[0] == '-') continue;
    std::vector<std::string> candidates;
    if (arg.find('/') != std::string::npos) {
      candidates.push_back(arg);
    } else {
      for (std::size_t start = 0; start <= search.size();) {
        const std::size_t colon = std::min(search.find(':', start), search.size());
        candidates.push_back((colon > start ? search.substr(start, colon - start) : ".") + "/" + arg);
        start = colon + 1;
      }
    }
    for (const std::string& c : candidates) {
      struct stat st;
      if (::stat(c.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      for (const std::string& needed : elf_needed(c))
        if (needed == "libmpi_abi.so.1") return true;
      break;  // (the first one found in PATH is the one run)
    }
  }
  return false;
}

// The runtime library for the command: PREFIX/lib/libattrcheck.so, or libattrcheck_abi.so (the
// standard ABI build) for a program that needs libmpi_abi.so.1. Where that build is missing (no
// MPI library here shipped the standard ABI when attrcheck was built) the native one is loaded,
// which passes every call through and says so (tool.other-mpi).
std::string library(const std::vector<std::string>& command) {
  std::string dir = data_dir();
  dir = dir.substr(0, dir.rfind('/'));
  const std::string abi = dir + "/libattrcheck_abi.so";
  if (runs_standard_abi(command) && exists(abi)) return abi;
  const std::string path = dir + "/libattrcheck.so";
  if (!exists(path)) die("the attrcheck library is missing: " + path);
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> command = parse(argc, argv, o);
  if (o.probe_library) return attrcheck::tools::probe_library(command, o.profile);
  std::string output = absolute(o.output);
  std::vector<Suppression> suppressions;
  try {  // before the run: a malformed file must not cost a whole job
    if (!o.suppressions.empty()) suppressions = load_suppressions(o.suppressions);
    if (!o.no_default_suppressions) {
      auto defaults = default_suppressions();
      suppressions.insert(suppressions.end(), defaults.begin(), defaults.end());
    }
  } catch (const ReportError& e) {
    die(e.what());
  }
  const char* rank_env = nullptr;  // `mpirun ... attrcheck -- app`: one rank
  for (const char* v : kRankEnv)
    if (std::getenv(v) != nullptr) {
      rank_env = std::getenv(v);
      break;
    }
  bool inner = rank_env != nullptr;
  make_dirs(output);
  if (!inner) clean(output);  // a fresh run: an earlier run's per-rank reports must not be merged in

  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env.emplace(std::string(*e, static_cast<std::size_t>(eq - *e)), eq + 1);
  }
  std::string preload = env.count("LD_PRELOAD") ? env["LD_PRELOAD"] : "";
  // attrcheck first, so that the calls it checks reach it before any other PMPI tool's wrapper
  // (which it then passes them to); --preload-first puts named libraries before it.
  env["LD_PRELOAD"] = (o.preload_first.empty() ? "" : o.preload_first + ":") + library(command) +
                      (preload.empty() ? "" : ":" + preload);
  env["ATTRCHECK_MODE"] = o.mode;
  env["ATTRCHECK_OUTPUT"] = output;
  env["ATTRCHECK_ON_ERROR"] = o.on_error;
  env["ATTRCHECK_STACK_DEPTH"] = o.stack_depth;
  env["ATTRCHECK_PROVENANCE"] = o.provenance;
  if (!o.portable_to.empty()) env["ATTRCHECK_PORTABLE_TO"] = o.portable_to;
  env["ATTRCHECK_RANK_SUMMARY"] = "0";  // the launcher prints the merged summary instead

  DirectoryMerge how;
  how.consume = true;  // what is merged is in report.json, which alone is left
  struct timespec started {};
  ::clock_gettime(CLOCK_REALTIME, &started);
  how.since = started;
  long child = -1;
  int status = run(command, env, &child);
  if (inner) how.only_pid = child;  // the other ranks' launchers merge theirs

  Json merged;
  bool completed = false;
  try {
    merged = merge_directory(output, command, inner ? std::nullopt : std::optional<int>(status), how, suppressions,
                             &completed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attrcheck: error: %s\n", e.what());
    return status ? status : 2;
  }
  std::vector<const Json*> gating = at_or_above(merged["findings"], o.fail_on);
  if (inner) {
    // Each rank's launcher merges what its own rank left into report.json; the merge that makes
    // the report complete prints it.
    long long rank = std::atoll(rank_env);
    if (completed) std::fputs(summary_text(merged).c_str(), stderr);
    bool mine = false;
    for (const Json* f : gating)
      if (const Json* ranks = member(*f, "ranks")) mine = mine || has_rank(*ranks, rank);
    if (status) return status;
    if (mine && o.fail_on != "never" && unchecked(gating)) return kExitUnchecked;
    return mine ? 1 : 0;
  }
  const bool none = merged["ranks"].empty() && o.mode != "off";
  if (none) not_loaded(output, command);
  std::fputs(summary_text(merged).c_str(), stderr);
  std::fprintf(stderr, "attrcheck: report: %s/report.json\n", output.c_str());
  if (status) {
    std::fprintf(stderr, "attrcheck: the command failed with exit status %d\n", status);
    return status;
  }
  if (const int crashed = abnormal_end(merged)) return crashed;
  if (o.fail_on != "never") {
    if (none) return kExitNotLoaded;
    if (const Json* f = unchecked(gating)) {
      if (text(*f, "rule") == "tool.bypassed")
        std::fprintf(stderr, "attrcheck: the run was not checked: a PMPI tool loaded before attrcheck kept the calls "
                     "from it (tool.bypassed; see README, With other tools)\n");
      else
        std::fprintf(stderr, "attrcheck: the run was not checked: the program runs on another MPI library than "
                     "attrcheck is built for (tool.other-mpi)\n");
      return kExitUnchecked;
    }
  }
  return gating.empty() ? 0 : 1;
}
