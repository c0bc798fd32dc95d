// Merging a run directory into its report.json (merge.hpp), under a lock, in turns with the
// other processes that merge it.
#include "merge/merge.hpp"

#include "merge/load.hpp"
#include "merge/symbolize.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <tuple>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <map>
#include <mutex>
#include <set>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

namespace attrcheck::reports {

namespace {

// The pid a per-rank file or a gathered report was written by (-1 if it does not say).
long writer_pid(const std::string& path) {
  try {
    if (ends_with(path, ".journal")) {
      std::string body = read_file(path);
      Json header = Json::parse(body.substr(0, body.find('\n')), nullptr, false);
      const Json* run = member(header, "run");
      return run ? static_cast<long>(integer(*run, "pid", -1)) : -1;
    }
    Json data = parse(path, read_file(path));
    if (const Json* g = member(data, "gathered")) return static_cast<long>(integer(*g, "pid", -1));
    const Json* run = member(data, "run");
    return run ? static_cast<long>(integer(*run, "pid", -1)) : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

std::string stem_of(const std::string& path) {
  auto dot = path.rfind('.');
  auto slash = path.rfind('/');
  return dot == std::string::npos || (slash != std::string::npos && dot < slash) ? path : path.substr(0, dot);
}

}  // namespace

bool is_gathered(const Json& report) { return member(report, "gathered") != nullptr; }

Json merge_directory(const std::string& dir, const std::optional<std::vector<std::string>>& command,
                     std::optional<int> exit_code, const DirectoryMerge& how,
                     const std::vector<Suppression>& suppressions, bool* completed) {
  // One merge at a time in a directory: a lock on the directory itself (no file of its own).
  int lock_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd >= 0)
    while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
    }
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) {
        ::flock(fd, LOCK_UN);
        ::close(fd);
      }
    }
  } unlock{lock_fd};
  const std::string report_path = dir + "/report.json";
  std::vector<std::string> files;
  for (const auto& f : gathered_files(dir)) files.push_back(f);
  for (const auto& f : rank_files(dir)) files.push_back(f);
  if (how.only_pid) {
    std::vector<std::string> mine;
    for (const auto& f : files)
      if (writer_pid(f) == *how.only_pid) mine.push_back(f);
    files = std::move(mine);
  }
  // The job's report: the gathered one rank 0 wrote, or the one an earlier merge of this run
  // made (a merged report merges again: its findings, its suppressed ones, the ranks it holds).
  std::optional<Json> before;
  bool was_complete = false;
  if (exists(report_path)) {
    struct stat st{};
    const bool current = !how.since || (::stat(report_path.c_str(), &st) == 0 &&
                                        (st.st_mtim.tv_sec > how.since->tv_sec ||
                                         (st.st_mtim.tv_sec == how.since->tv_sec && st.st_mtim.tv_nsec >= how.since->tv_nsec)));
    try {
      Json data = load(report_path);
      if (text(data, "schema") == kMergedSchema && current && (how.consume || is_gathered(data) || files.empty())) {
        was_complete = !is_gathered(data) && complete(data);
        before = std::move(data);
      }
    } catch (const ReportError&) {
      // An unreadable report.json (a write cut short) is made anew from what is there.
    }
  }
  Merger merger;
  if (before) merger.add(report_path, *before);
  before.reset();
  std::vector<std::string> merged_files;
  for (const auto& path : files) {
    Loaded in;
    try {
      in = load_for_merge(path);
    } catch (const ReportError& e) {
      in.data = {{"schema", kRankSchema}, {"version", kVersion}, {"findings", Json::array()},
                 {"run", {{"status", std::string("unreadable: ") + e.what()}}}};
    }
    if (in.stacks) in.stacks->tolerate();
    merger.add(path, in.data, in.stacks.get(), in.split ? &in.findings : nullptr);
    merged_files.push_back(path);
  }
  Json merged = merger.result(command, exit_code);
  symbolize(merged);
  suppress(merged, suppressions);
  write_atomic(report_path, dump(merged, 1) + "\n");
  if (how.consume) {
    // In report.json now: a rank's report, its journal, a spawned job's gathered report.
    for (const auto& path : merged_files) {
      ::unlink(path.c_str());
      if (!ends_with(path, ".journal")) ::unlink((stem_of(path) + ".journal").c_str());
    }
  }
  if (how.consume && !how.only_pid) {
    if (DIR* d = ::opendir(dir.c_str())) {
      std::vector<std::string> doomed;
      while (struct dirent* e = ::readdir(d)) {
        const char* n = e->d_name;
        for (const char* pattern : {".rank-*.json.*.tmp", ".job-*.json.*.tmp", ".pid-*.json.*.tmp", ".attrcheck-*.tmp"})
          if (::fnmatch(pattern, n, 0) == 0) {
            doomed.push_back(dir + "/" + n);
            break;
          }
      }
      ::closedir(d);
      for (const auto& f : doomed) ::unlink(f.c_str());
    }
  }
  if (completed) *completed = !was_complete && complete(merged);
  return merged;
}

bool complete(const Json& merged) {
  std::int64_t count = 0;
  std::set<std::string> sizes;
  std::int64_t size = 0;
  if (const Json* ranks = member(merged, "ranks"); ranks && ranks->is_array()) {
    for (const Json& r : *ranks) {
      if (truthy(r, "spawned") || truthy(r, "after_gathered") || ends_with(text(r, "file"), ".journal")) continue;
      count = add_sat(count, ranks_in_entry(r));
      if (truthy(r, "size")) {
        sizes.insert(dump(r["size"]));
        size = integer(r, "size", 0);
      }
    }
  }
  return sizes.size() == 1 && count >= size;
}

}  // namespace attrcheck::reports
