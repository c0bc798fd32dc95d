#include "report/merge.hpp"
#include "report/outputs.hpp"

#include "report/load.hpp"
#include "report/symbolize.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
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

const char* const kSeverities[] = {"error", "warning", "info"};

int severity_index(const std::string& s) {
  for (int i = 0; i < 3; ++i)
    if (s == kSeverities[i]) return i;
  return 3;
}

// A set of ranks as Python keeps it: integers, and None (a rank nobody knows) at most once.
struct RankSet {
  std::set<std::int64_t> ranks;
  bool none = false;
  void add(const Json* r) {
    if (is_int(r)) ranks.insert(r->get<std::int64_t>());
    else none = true;
  }
  Json sorted() const {
    Json out = Json::array();
    for (auto r : ranks) out.push_back(r);
    if (none) out.push_back(nullptr);
    return out;
  }
};

}  // namespace

std::string job_of(const Json& run) {
  if (!truthy(run, "spawned")) return "";
  if (truthy(run, "job")) return text(run, "job");
  const Json* pid = member(run, "pid");
  return "pid" + (pid ? py_str(*pid) : std::string("None"));
}

struct Merger::State {
  struct Entry {
    Json finding;
    std::int64_t count = 0;
    RankSet ranks;
    std::map<std::string, RankSet> spawned;
  };
  std::vector<Json> ranks;
  std::vector<Entry> entries;
  std::unordered_map<std::string, std::size_t> index;
  // The merged report's stacks: each distinct one once (by module and offset, the same in every
  // rank; a Python frame by file, line and function), numbered from 1.
  std::unordered_map<std::string, std::int64_t> depot_ids;
  Json stacks = Json::array();

  std::int64_t intern(const Json& frames) {
    if (!frames.is_array() || frames.empty()) return 0;
    std::string key;
    for (const Json& fr : frames) {
      if (is_python_frame(fr)) {  // a Python frame: by file, line and function
        key += "\x02" + text(fr, "file") + '\0' + dump(fr.value("line", Json())) + '\0' + text(fr, "function") + '\x01';
        continue;
      }
      key += text(fr, "module");
      key += '\0';
      key += text(fr, "offset");
      key += '\x01';
    }
    auto [it, fresh] = depot_ids.emplace(std::move(key), static_cast<std::int64_t>(stacks.size()) + 1);
    if (fresh) stacks.push_back(Json{{"id", it->second}, {"frames", frames}});
    return it->second;
  }

  // Points a finding's stack references (its own and its provenance's) at the merged depot.
  void restack(Json& d, const std::unordered_map<std::int64_t, const Json*>& table, LazyStacks* lazy) {
    auto it = d.find("stack");
    if (it == d.end()) return;
    static const Json kNone = Json::array();
    const Json* frames = &kNone;
    if (is_int(&*it)) {
      auto t = table.find(it->get<std::int64_t>());
      if (t != table.end()) frames = t->second;
      else if (lazy != nullptr)
        if (const Json* f = lazy->frames(it->get<std::int64_t>())) frames = f;
    }
    if (std::int64_t sid = intern(*frames)) *it = sid;
    else d.erase("stack");
  }
};

Merger::Merger() : s_(std::make_unique<State>()) {}
Merger::~Merger() = default;

void Merger::add(const std::string& path, const Json& data, LazyStacks* lazy, const std::vector<FindingKey>* keys) {
  try {
    std::unordered_map<std::int64_t, const Json*> table;
    if (const Json* stacks = member(data, "stacks"); stacks && stacks->is_array()) {
      for (const Json& s : *stacks) {
        const Json* id = member(s, "id");
        const Json* frames = member(s, "frames");
        if (is_int(id) && frames) table.emplace(id->get<std::int64_t>(), frames);
      }
    }
    const Json* rank = nullptr;
    std::string job;
    static const Json kEmpty = Json::object();
    if (text(data, "schema") == kMergedSchema) {
      if (const Json* ranks = member(data, "ranks"); ranks && ranks->is_array())
        for (const Json& r : *ranks) s_->ranks.push_back(r);
    } else {
      const Json* run_p = member(data, "run");
      const Json& run = run_p && run_p->is_object() ? *run_p : kEmpty;
      rank = member(run, "rank");
      job = job_of(run);
      auto value = [&run](const char* key) {
        const Json* v = member(run, key);
        return v ? *v : Json();
      };
      Json entry = {{"rank", value("rank")}, {"size", value("size")}, {"pid", value("pid")},
                    {"status", value("status")}, {"signal", member(run, "signal") ? value("signal") : Json(0)},
                    {"mode", value("mode")}, {"file", basename(path)}};
      if (const Json* spawned = member(run, "spawned")) {
        entry["job"] = truthy(run, "job") ? value("job") : Json();
        entry["spawned"] = truthy(spawned);
      }
      if (const Json* counts = member(data, "intercepted"); counts && counts->is_object())
        entry["intercepted"] = *counts;
      s_->ranks.push_back(std::move(entry));
    }
    auto fold = [&](const Json* whole, const std::string& key, std::int64_t count, const Json& f_for_ranks) {
      auto [it, fresh] = s_->index.emplace(key, s_->entries.size());
      if (fresh) {
        State::Entry e;
        e.finding = Json::object();
        for (const auto& [k, v] : whole->items())
          if (k != "rank" && k != "ranks" && k != "count" && k != "spawned_ranks") e.finding[k] = v;
        s_->restack(e.finding, table, lazy);
        if (auto p = e.finding.find("provenance"); p != e.finding.end() && truthy(&*p) && p->is_array())
          for (Json& prov : *p)
            if (prov.is_object()) s_->restack(prov, table, lazy);
        s_->entries.push_back(std::move(e));
      }
      State::Entry& e = s_->entries[it->second];
      e.count = add_sat(e.count, count);
      const Json* ranks = member(f_for_ranks, "ranks");
      if (!job.empty()) {
        e.spawned[job].add(rank);
      } else if ((rank != nullptr && !rank->is_null()) || ranks == nullptr) {
        e.ranks.add(rank);
      } else {
        if (ranks->is_array())
          for (const Json& r : *ranks) e.ranks.add(&r);
        if (const Json* sp = member(f_for_ranks, "spawned_ranks"); sp && sp->is_array()) {
          for (const Json& s : *sp) {
            RankSet& set = e.spawned[text(s, "job")];
            if (const Json* rs = member(s, "ranks"); rs && rs->is_array())
              for (const Json& r : *rs) set.add(&r);
          }
        }
      }
    };
    if (keys != nullptr && lazy != nullptr) {
      // A rank report read quickly: a finding's text is parsed only when it is a new one.
      static const Json kNoRanks = Json::object();
      for (const FindingKey& k : *keys) {
        if (k.whole) {
          Json f = lazy->parse_range(k.begin, k.end);
          fold(&f, finding_key(f), integer(f, "count", 1), f);
          continue;
        }
        if (s_->index.count(k.key)) {
          fold(nullptr, k.key, k.count, kNoRanks);
        } else {
          Json f = lazy->parse_range(k.begin, k.end);
          fold(&f, k.key, k.count, kNoRanks);
        }
      }
      return;
    }
    const Json* findings = member(data, "findings");
    if (!findings || !findings->is_array()) return;
    for (const Json& f : *findings)
      if (f.is_object()) fold(&f, finding_key(f), integer(f, "count", 1), f);
  } catch (const Json::exception& e) {
    throw ReportError(path + ": not a usable report: " + e.what());
  }
}

Json Merger::result(const std::optional<std::vector<std::string>>& command, std::optional<int> exit_code) {
  std::vector<std::size_t> order(s_->entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<std::pair<int, std::string>> keys;
  keys.reserve(order.size());
  for (const auto& e : s_->entries) keys.emplace_back(severity_index(text(e.finding, "severity")), text(e.finding, "rule"));
  std::stable_sort(order.begin(), order.end(), [&keys](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  Json findings = Json::array();
  std::int64_t totals[3] = {0, 0, 0};
  for (std::size_t i : order) {
    State::Entry& e = s_->entries[i];
    Json f = std::move(e.finding);
    f["count"] = e.count;
    f["ranks"] = e.ranks.sorted();
    if (!e.spawned.empty()) {
      Json spawned = Json::array();
      for (const auto& [job, set] : e.spawned) spawned.push_back(Json{{"job", job}, {"ranks", set.sorted()}});
      f["spawned_ranks"] = std::move(spawned);
    }
    int sev = keys[i].first;
    if (sev < 3) totals[sev] = add_sat(totals[sev], e.count);
    findings.push_back(std::move(f));
  }
  auto rank_order = [](const Json& r) {
    const Json* rank = member(r, "rank");
    return std::make_tuple(truthy(r, "spawned"), text(r, "job"), !is_int(rank),
                           is_int(rank) ? rank->get<std::int64_t>() : 0);
  };
  std::stable_sort(s_->ranks.begin(), s_->ranks.end(),
                   [&rank_order](const Json& a, const Json& b) { return rank_order(a) < rank_order(b); });
  Json out = {{"schema", kMergedSchema}, {"version", kVersion}, {"tool", {{"name", "attrcheck"}}}};
  // What the ranks intercepted, added up (ranks rebuilt from a journal alone did not say).
  Json intercepted = Json::object();
  for (const Json& r : s_->ranks) {
    const Json* counts = member(r, "intercepted");
    if (!counts || !counts->is_object()) continue;
    for (const auto& [family, bindings] : counts->items()) {
      if (!bindings.is_object()) continue;
      for (const auto& [binding, n] : bindings.items())
        if (is_int(&n)) {
          Json& sum = intercepted[family][binding];
          sum = add_sat(sum.is_number_integer() ? sum.get<std::int64_t>() : 0, n.get<std::int64_t>());
        }
    }
  }
  out["ranks"] = Json(std::move(s_->ranks));
  if (!intercepted.empty()) out["intercepted"] = std::move(intercepted);
  out["summary"] = {{"error", totals[0]}, {"warning", totals[1]}, {"info", totals[2]}};
  out["findings"] = std::move(findings);
  out["stacks"] = std::move(s_->stacks);
  if (command) out["command"] = *command;
  if (exit_code) out["exit_code"] = *exit_code;
  s_ = std::make_unique<State>();
  return out;
}

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

Json merge_directory(const std::string& dir, const std::optional<std::vector<std::string>>& command,
                     std::optional<int> exit_code, bool lock, const std::vector<Suppression>& suppressions) {
  int lock_fd = -1;
  if (lock) {
    lock_fd = ::open((dir + "/.merge.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock_fd >= 0)
      while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
      }
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
  Json merged = merge_files(rank_files(dir), command, exit_code, true);
  symbolize(merged);
  suppress(merged, suppressions);
  write_atomic(dir + "/report.json", dump(merged, 1) + "\n");
  return merged;
}

bool complete(const Json& merged) {
  std::int64_t count = 0;
  std::set<std::string> sizes;
  std::int64_t size = 0;
  if (const Json* ranks = member(merged, "ranks"); ranks && ranks->is_array()) {
    for (const Json& r : *ranks) {
      if (truthy(r, "spawned") || ends_with(text(r, "file"), ".journal")) continue;
      ++count;
      if (truthy(r, "size")) {
        sizes.insert(dump(r["size"]));
        size = integer(r, "size", 0);
      }
    }
  }
  return sizes.size() == 1 && count >= size;
}

bool claim_once(const std::string& dir, const std::string& what) {
  int fd = ::open((dir + "/." + what + ".done").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

}  // namespace attrcheck::reports
