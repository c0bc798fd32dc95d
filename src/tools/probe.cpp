// attrcheck --probe-library: runs the library probes (src/probes/) natively under the MPI
// launcher, reads their answers and prints them beside the profile of the library's release
// series (src/runtime/profile/mpi_profile.def), marking every difference.
#include "probe.hpp"

#include "merge/suppress.hpp"  // data_dir
#include "runtime/profile/mpi_profile_table.hpp"
#include "tools/elf_needed.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

namespace attrcheck::tools {

namespace {

using rt::kReleases;
using rt::ReleaseProfile;

constexpr int kProbeSeconds = 120;  // a probe that takes longer is stopped (it never should)

struct Run {
  int status = -1;  // the launcher's exit status (128+N for a signal), -1 if it could not run
  std::string out, err;
  bool timed_out = false;
};

// Runs `command` with LD_PRELOAD cleared of attrcheck (the probes ask the library itself),
// collecting its output, for at most kProbeSeconds.
Run run_native(const std::vector<std::string>& command) {
  Run r;
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) {
      entries.emplace_back(*e);
      continue;
    }
    std::string kept, list = *e + 11;
    for (std::size_t i = 0; i <= list.size();) {
      std::size_t j = list.find_first_of(": ", i);
      if (j == std::string::npos) j = list.size();
      std::string item = list.substr(i, j - i);
      if (!item.empty() && item.find("libattrcheck") == std::string::npos) kept += (kept.empty() ? "" : ":") + item;
      i = j + 1;
    }
    if (!kept.empty()) entries.push_back("LD_PRELOAD=" + kept);
  }
  std::vector<char*> envp, args;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const auto& a : command) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) return r;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, err[0]);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group: a stuck launcher is stopped whole
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  pid_t pid;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    r.err = "cannot run " + command[0] + ": " + std::strerror(rc);
    ::close(out[0]);
    ::close(err[0]);
    return r;
  }
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  while (open > 0) {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > kProbeSeconds) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, 1000) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (pollfd& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return r;
}

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// The launcher the build recorded for its library (lib/attrcheck/mpi-build.json, in a build
// tree), else `mpiexec -n`.
std::vector<std::string> default_launcher() {
  std::ifstream in(reports::data_dir() + "/mpi-build.json");
  std::string mpiexec = "mpiexec", flag = "-n";
  if (in) {
    const nlohmann::json b = nlohmann::json::parse(in, nullptr, false);
    if (b.is_object()) {
      if (b.contains("mpiexec") && b["mpiexec"].is_string() && !b["mpiexec"].get<std::string>().empty())
        mpiexec = b["mpiexec"].get<std::string>();
      if (b.contains("numproc_flag") && b["numproc_flag"].is_string() && !b["numproc_flag"].get<std::string>().empty())
        flag = b["numproc_flag"].get<std::string>();
    }
  }
  return {mpiexec, flag};
}

// The standard ABI libraries (libmpi_abi.so.1 of each library) the build recorded
// (lib/attrcheck/mpi-build.json), real paths; none where there is no standard ABI.
std::vector<std::string> recorded_abi_libraries() {
  std::vector<std::string> out;
  std::ifstream in(reports::data_dir() + "/mpi-build.json");
  if (!in) return out;
  const nlohmann::json b = nlohmann::json::parse(in, nullptr, false);
  if (!b.is_object() || !b.contains("standard_abi_libraries") || !b["standard_abi_libraries"].is_array()) return out;
  for (const auto& l : b["standard_abi_libraries"])
    if (l.is_string()) {
      char real[4096];
      const std::string path = l.get<std::string>();
      out.push_back(::realpath(path.c_str(), real) ? std::string(real) : path);
    }
  return out;
}

// The first dotted number of the version text ("Open MPI v5.0.7, ..." -> "5.0.7").
std::string version_number(const std::string& text) {
  const std::size_t at = text.find_first_of("0123456789");
  if (at == std::string::npos) return "";
  const std::size_t end = text.find_first_not_of("0123456789.", at);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

const rt::MpiProfile* library_named_in(const std::string& version_text) {
  for (const rt::MpiProfile& p : rt::kProfiles)
    if (*p.marker && version_text.find(p.marker) != std::string::npos) return &p;
  return nullptr;
}

// What a release's profile answers to each question: "divergence ID" / "behaviour ID" -> yes / no,
// "error-class SITUATION" -> the class.
std::map<std::string, std::string> expected_answers(const ReleaseProfile& r) {
  std::map<std::string, std::string> a;
  for (const rt::KnownDivergence& d : rt::kDivergences)
    a["divergence " + std::string(d.id)] = rt::release_has(r, d.id) ? "yes" : "no";
  for (const rt::Behaviour& b : rt::kBehaviours)
    a["behaviour " + std::string(b.id)] = rt::release_has(r, b.id) ? "yes" : "no";
  for (const rt::LibraryErrorClass& e : rt::kErrorClasses)
    if (e.release == r.release) a["error-class " + std::string(e.situation)] = e.error_class;
  return a;
}

}  // namespace

int probe_library(const std::vector<std::string>& launcher_args, const std::string& against) {
  const std::string dir = reports::data_dir() + "/probes";
  std::vector<std::string> launcher = launcher_args;
  if (launcher.empty()) launcher = default_launcher();
  if (launcher.size() == 1) launcher.push_back("-n");  // `-- mpiexec.mpich`: its -n
  std::vector<std::string> probes;
  for (const char* name : {"probe_library", "probe_fortran"})
    if (executable(dir + "/" + name)) probes.push_back(dir + "/" + name);
  if (probes.empty()) {
    std::fprintf(stderr, "attrcheck: error: no library probes in %s\n", dir.c_str());
    return 2;
  }
  const bool fortran = probes.size() > 1;

  std::map<std::string, std::string> answers;  // question -> the library's answer
  std::vector<std::string> notes;
  std::string version_text;
  // probe_library once more with --abort-questions: the questions whose answer may be an abort.
  std::vector<std::vector<std::string>> runs;
  for (const std::string& probe : probes) {
    runs.push_back({probe});
    if (probe.size() >= 14 && probe.compare(probe.size() - 14, 14, "/probe_library") == 0)
      runs.push_back({probe, "--abort-questions"});
  }
  for (const std::vector<std::string>& run : runs) {
    std::vector<std::string> command = launcher;
    command.push_back("2");
    command.insert(command.end(), run.begin(), run.end());
    const bool may_abort = run.size() > 1;
    std::string shown;
    for (const auto& c : command) shown += (shown.empty() ? "" : " ") + c;
    std::fprintf(stderr, "attrcheck: probing: %s\n", shown.c_str());
    const Run r = run_native(command);
    // A run that died while a question was asked answers it "abort".
    std::string asking;
    if (may_abort)
      for (std::size_t at = r.out.find("asking "); at != std::string::npos; at = r.out.find("asking ", at + 1)) {
        const std::size_t eol = r.out.find('\n', at);
        const std::string question = r.out.substr(at + 7, eol == std::string::npos ? std::string::npos : eol - at - 7);
        asking = r.out.find(question + " ", eol == std::string::npos ? r.out.size() : eol) == std::string::npos ? question : "";
      }
    if (r.status != 0 && !asking.empty() && !r.timed_out) {
      answers[asking] = "abort";
      continue;
    }
    if (r.status != 0) {
      std::fprintf(stderr, "attrcheck: error: the probe %s (exit status %d)%s\n%s", shown.c_str(), r.status,
                   r.timed_out ? ", stopped after 120 s" : " failed", r.err.c_str());
      return 2;
    }
    std::size_t pos = 0;
    while (pos < r.out.size()) {
      std::size_t eol = r.out.find('\n', pos);
      if (eol == std::string::npos) eol = r.out.size();
      const std::string line = r.out.substr(pos, eol - pos);
      pos = eol + 1;
      const std::size_t sp1 = line.find(' ');
      if (sp1 == std::string::npos) continue;
      const std::string what = line.substr(0, sp1);
      if (what == "library-version") {
        version_text = line.substr(sp1 + 1);
      } else if (what == "note") {
        notes.push_back(line.substr(sp1 + 1));
      } else if (what == "divergence" || what == "behaviour" || what == "error-class") {
        const std::size_t sp2 = line.rfind(' ');
        if (sp2 > sp1) answers[line.substr(0, sp2)] = line.substr(sp2 + 1);
      }
    }
  }

  const rt::MpiProfile* library = library_named_in(version_text);
  // Asked of the library's standard ABI library (libmpi_abi_ID.so..., as the build recorded it), if
  // it has one: whether it has the MPI-1 caching calls.
  if (library)
    for (const std::string& abi : recorded_abi_libraries()) {
      if (abi.find(std::string("libmpi_abi_") + library->id) == std::string::npos) continue;
      const std::vector<std::string> defined = elf_defined_symbols(abi);
      if (defined.empty()) continue;
      bool lacks = true;
      for (const char* name : {"MPI_Keyval_create", "MPI_Keyval_free", "MPI_Attr_put", "MPI_Attr_get", "MPI_Attr_delete"})
        lacks = lacks && std::find(defined.begin(), defined.end(), name) == defined.end();
      answers["behaviour standard-abi-lacks-mpi1-calls"] = lacks ? "yes" : "no";
    }
  const std::string version = version_number(version_text);
  const ReleaseProfile* release = nullptr;
  if (!against.empty()) {
    for (const ReleaseProfile& r : kReleases)
      if (against == r.id) release = &r;
    if (!release) {
      std::string known;
      for (const ReleaseProfile& r : kReleases)
        if (r.library != rt::Library::Unknown) known += std::string(known.empty() ? "" : ", ") + r.id;
      std::fprintf(stderr, "attrcheck: error: --profile %s is no release profile (%s)\n", against.c_str(), known.c_str());
      return 2;
    }
  } else if (library) {
    release = &rt::release_for(library->library, version.c_str());
  }
  std::printf("library: %s\n", version_text.empty() ? "(the probe did not say)" : version_text.c_str());
  if (!release) {
    std::printf("profile: none: attrcheck knows no profile of this library; its answers:\n");
    for (const auto& [question, answer] : answers) std::printf("  %-60s %s\n", question.c_str(), answer.c_str());
    return 1;
  }
  std::printf("profile: %s (%s, probed on %s)%s\n", release->id, release->name, release->probed,
              against.empty() ? "" : ", as asked");

  const std::map<std::string, std::string> expected = expected_answers(*release);
  int differences = 0;
  std::printf("  %-62s %-16s %s\n", "question", "library", "profile");
  for (const auto& [question, answer] : answers) {
    const auto it = expected.find(question);
    // A question no profile names: a yes is news (a divergence or behaviour nobody recorded).
    const std::string want = it != expected.end() ? it->second : question.rfind("error-class ", 0) == 0 ? "?" : "no";
    const bool same = answer == want;
    differences += !same;
    std::printf("%s %-62s %-16s %s\n", same ? " " : "!", question.c_str(), answer.c_str(), want.c_str());
  }
  for (const auto& [question, want] : expected)
    if (!answers.count(question))
      std::printf("  %-62s %-16s %s%s\n", question.c_str(), "(not asked)", want.c_str(),
                  fortran || question.find("fortran") == std::string::npos ? "" : " (no Fortran probe in this build)");
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  if (differences)
    std::printf("attrcheck: %d answer(s) differ from the profile %s (marked !): add a release to "
                "src/runtime/profile/mpi_profile.def from these answers, or tell attrcheck's maintainers\n",
                differences, release->id);
  else
    std::printf("attrcheck: the library answers as its profile %s says\n", release->id);
  return differences ? 1 : 0;
}

}  // namespace attrcheck::tools
