// Merging report files (merge.hpp), parsed on every core and folded in order, and writing a
// file atomically.
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

Json broken(const std::string& message) {
  return {{"schema", kRankSchema}, {"version", kVersion}, {"findings", Json::array()},
          {"run", {{"status", "unreadable: " + message}}}};
}

}  // namespace

Json merge_files(const std::vector<std::string>& paths, const std::optional<std::vector<std::string>>& command,
                 std::optional<int> exit_code, bool tolerate_broken) {
  Merger merger;
  unsigned cores = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  if (cores < 2 || paths.size() < 64) {
    for (const auto& path : paths) {
      Loaded in;
      try {
        in = load_for_merge(path);
      } catch (const ReportError& e) {
        if (!tolerate_broken) throw;
        in.data = broken(e.what());
      }
      if (in.stacks && tolerate_broken) in.stacks->tolerate();
      merger.add(path, in.data, in.stacks.get(), in.split ? &in.findings : nullptr);
    }
    return merger.result(command, exit_code);
  }
  // Parsing is most of the work: one thread per core parses files into a window of slots, and
  // this thread folds them in order (the result is the same as one file after the other).
  struct Slot {
    bool ready = false;
    Loaded in;
    std::string error;
  };
  const std::size_t window = 8 * cores;
  std::vector<Slot> ring(window);
  std::mutex m;
  std::condition_variable cv;
  std::size_t next = 0, folded = 0;
  bool stop = false;
  auto worker = [&] {
    for (;;) {
      std::size_t i;
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return stop || next >= paths.size() || next < folded + window; });
        if (stop || next >= paths.size()) return;
        i = next++;
      }
      Slot slot;
      try {
        slot.in = load_for_merge(paths[i]);
      } catch (const std::exception& e) {
        slot.error = e.what();
      }
      slot.ready = true;
      std::lock_guard<std::mutex> lock(m);
      ring[i % window] = std::move(slot);
      cv.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < cores; ++t) threads.emplace_back(worker);
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
  };
  try {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      Slot slot;
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return ring[i % window].ready; });
        slot = std::move(ring[i % window]);
        ring[i % window].ready = false;
        folded = i + 1;
      }
      cv.notify_all();
      if (!slot.error.empty()) {
        if (!tolerate_broken) throw ReportError(slot.error);
        slot.in.data = broken(slot.error);
      }
      if (slot.in.stacks && tolerate_broken) slot.in.stacks->tolerate();
      merger.add(paths[i], slot.in.data, slot.in.stacks.get(), slot.in.split ? &slot.in.findings : nullptr);
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  return merger.result(command, exit_code);
}

void write_atomic(const std::string& path, const std::string& content, bool overwrite) {
  if (!overwrite && exists(path)) throw ReportError(path + ": already exists (pass --force to overwrite)");
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = dir + "/.attrcheck-XXXXXX.tmp";
  int fd = ::mkstemps(tmp.data(), 4);
  if (fd < 0) throw ReportError(path + ": " + std::strerror(errno));
  ::fchmod(fd, 0644);
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw ReportError(path + ": " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw ReportError(path + ": " + std::strerror(e));
  }
}

}  // namespace attrcheck::reports
