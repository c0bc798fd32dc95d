// The job's report gathered over MPI at MPI_Finalize (see gather.hpp).
#include "runtime/process/gather.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>
#include <memory>
#include <string>
#include <vector>

#include "merge/merge.hpp"
#include "report/symbolize.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/chain.hpp"

namespace attrcheck::rt {

namespace {

namespace reports = attrcheck::reports;

// Tags on the runtime's own communicators (no one else sends there).
constexpr int kTagFindings = 1;
constexpr int kTagVerdict = 2;

struct Gather {
  bool ready = false;
  timespec started{};  // (CLOCK_REALTIME) when MPI_Init prepared the gather
  MPI_Comm world = MPI_COMM_NULL;    // a duplicate of MPI_COMM_WORLD
  MPI_Comm node = MPI_COMM_NULL;     // the ranks on this node
  MPI_Comm leaders = MPI_COMM_NULL;  // node rank 0 of every node (MPI_COMM_NULL elsewhere)
};
Gather g_gather;

double now() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// MPI_Finalize's findings are held in memory while the gather takes them (Journal::hold); a
// gather that takes longer than this (a rank that does not come, and the launcher may kill the
// waiting ones: SIGKILL) puts them in the journal after all.
constexpr double kHoldSeconds = 1.0;
double g_hold_until = 0;

// Waiting without taking a core from the ranks that share it (jobs are often oversubscribed
// while being checked): spin briefly, then sleep in growing steps up to a millisecond.
struct Backoff {
  unsigned rounds = 0;
  void pause() noexcept {
    if (g_hold_until > 0 && now() > g_hold_until) {
      g_hold_until = 0;
      state().findings.release_journal();
    }
    if (++rounds < 64) return;
    timespec ts{0, static_cast<long>(std::min(1000000u, 1000u * (rounds - 63)))};
    nanosleep(&ts, nullptr);
  }
};

// Which ranks of the job have ended without MPI_Finalize (exited, aborted, or died of a signal
// the runtime caught): each says so in its own report, written as it ends. A rank that will never
// come to the gather is not waited for to the deadline. That matters beyond the wait: MPICH 5.0's
// Hydra, now and then, neither ends the job nor lets MPI_Finalize finish when the other ranks
// reach it a while after a rank exited (natively 2 of 30 runs with a 2-second delay, none of 60
// without one): the sooner they reach it, the closer to native. Only a report in the
// rank's own place in the output directory counts, written since the gather was prepared and
// with an ended status; without a shared file system the wait is as before. Each rank's file is
// looked at once per kCheckSeconds at most (a stat; the file is read only once it is new).
class Departures {
 public:
  bool left(int world_rank) {
    if (world_rank < 0) return false;
    Seen& s = seen_[world_rank];
    if (s.left) return true;
    const double t = now();
    if (t < s.next_check) return false;
    s.next_check = t + kCheckSeconds;
    const std::string path = path_of(world_rank);
    struct stat st{};
    if (path.empty() || stat(path.c_str(), &st) != 0) return false;
    if (st.st_mtim.tv_sec < g_gather.started.tv_sec ||
        (st.st_mtim.tv_sec == g_gather.started.tv_sec && st.st_mtim.tv_nsec < g_gather.started.tv_nsec))
      return false;  // an earlier run's
    try {
      const reports::Json doc = reports::load(path);
      const reports::Json* run = reports::member(doc, "run");
      const std::string status = run ? reports::text(*run, "status") : std::string();
      s.left = status == "exit-without-finalize" || status == "aborted" || status == "signal";
    } catch (const std::exception&) {
      // Being written, or unreadable: looked at again later.
    }
    return s.left;
  }
  // The ranks known to have left, in order.
  std::vector<int> gone() const {
    std::vector<int> out;
    for (const auto& [rank, s] : seen_)
      if (s.left) out.push_back(rank);
    return out;
  }

 private:
  static constexpr double kCheckSeconds = 0.1;
  struct Seen {
    bool left = false;
    double next_check = 0;
  };
  std::string path_of(int world_rank) const {
    const char* own = state().report.path();
    const char* slash = std::strrchr(own, '/');
    if (!slash) return std::string();
    char name[160];
    report_file_name(state().run, world_rank, name, sizeof name);
    return std::string(own, static_cast<std::size_t>(slash - own) + 1) + name;
  }
  std::map<int, Seen> seen_;
};
Departures g_departures;

// A k-nomial tree over a communicator of `size` ranks, rooted at 0: a rank's parent clears the
// lowest nonzero digit of its number in base kFanIn; ceil(log_kFanIn(size)) rounds. Each round
// is a hop that waits for the receiver to run, which on a machine with more ranks than cores is
// a scheduling delay: fewer, wider rounds (8 children at most per round, merged one by one) cost
// less than a binomial tree's log2 rounds.
constexpr int kFanIn = 8;
struct Tree {
  int parent = -1;
  std::vector<int> children;
};
Tree tree_of(int rank, int size) {
  Tree t;
  long step = 1;
  for (; step < size; step *= kFanIn) {
    const long digit = (rank / step) % kFanIn;
    if (digit != 0) {
      t.parent = static_cast<int>(rank - digit * step);
      break;
    }
    for (long d = 1; d < kFanIn; ++d)
      if (rank + d * step < size) t.children.push_back(static_cast<int>(rank + d * step));
  }
  return t;
}

// The rank's report as JSON text, rendered by the report writer itself (into memory).
bool render_own(const Runtime& r, std::string* out) {
  const int fd = memfd_create("attrcheck-report", MFD_CLOEXEC);
  if (fd < 0) return false;
  bool ok = render_json(fd, r.run, r.findings);
  const off_t size = ok ? lseek(fd, 0, SEEK_END) : -1;
  if (size <= 0) ok = false;
  if (ok) {
    out->resize(static_cast<std::size_t>(size));
    std::size_t done = 0;
    while (done < out->size()) {
      const ssize_t n = pread(fd, &(*out)[done], out->size() - done, static_cast<off_t>(done));
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ok = done == out->size();
  }
  close(fd);
  return ok;
}

// One stage of the tree (within the node, or among the nodes) as this rank takes part in it:
// receives its children's findings before the deadline, sends up, hears and hands on verdicts.
class Level {
 public:
  Level(MPI_Comm comm, double deadline, double verdict_deadline)
      : comm_(comm), deadline_(deadline), verdict_deadline_(verdict_deadline) {
    int rank = 0, size = 1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    tree_ = tree_of(rank, size);
    // The world ranks of the parent and the children (whose reports say if they left).
    std::vector<int> mine(tree_.children);
    mine.push_back(tree_.parent);
    world_.assign(mine.size(), -1);
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    if (PMPI_Comm_group(comm, &group) == MPI_SUCCESS && PMPI_Comm_group(g_gather.world, &world) == MPI_SUCCESS)
      for (std::size_t i = 0; i < mine.size(); ++i)
        if (mine[i] >= 0 && PMPI_Group_translate_ranks(group, 1, &mine[i], world, &world_[i]) != MPI_SUCCESS)
          world_[i] = -1;
    if (group != MPI_GROUP_NULL) PMPI_Group_free(&group);
    if (world != MPI_GROUP_NULL) PMPI_Group_free(&world);
    for (int& w : world_)
      if (w == MPI_UNDEFINED) w = -1;
  }
  bool root() const noexcept { return tree_.parent < 0; }
  bool leaf() const noexcept { return tree_.children.empty(); }
  // What the subtree sent up the tree so far: bytes in all, the largest message.
  std::uint64_t bytes = 0, largest = 0;
  void count_sent(const reports::Json& doc, std::uint64_t size) {
    bytes += size;
    largest = std::max(largest, size);
    if (const reports::Json* st = reports::member(doc, "gather_stats")) {
      bytes += static_cast<std::uint64_t>(reports::integer(*st, "bytes", 0));
      largest = std::max(largest, static_cast<std::uint64_t>(reports::integer(*st, "largest", 0)));
    }
  }

  // Merges the children's findings into `merger`.
  void gather_children(reports::Merger& merger) {
    std::vector<bool> done(tree_.children.size(), false);
    std::size_t left = tree_.children.size();
    Backoff wait;
    while (left && now() < deadline_) {
      bool progressed = false;
      for (std::size_t i = 0; i < tree_.children.size(); ++i) {
        if (done[i]) continue;
        int flag = 0;
        MPI_Status st;
        if (PMPI_Iprobe(tree_.children[i], kTagFindings, comm_, &flag, &st) != MPI_SUCCESS) return;
        if (!flag) continue;
        int size = 0;
        if (PMPI_Get_count(&st, MPI_CHAR, &size) != MPI_SUCCESS || size < 0) return;
        std::string text(static_cast<std::size_t>(size), '\0');
        if (PMPI_Recv(text.data(), size, MPI_CHAR, tree_.children[i], kTagFindings, comm_, MPI_STATUS_IGNORE) !=
            MPI_SUCCESS)
          return;
        done[i] = true;
        --left;
        progressed = true;
        // A child's findings that cannot be read are not merged (that child is then told it is
        // not in the report, and writes its own).
        reports::Json doc = reports::Json::parse(text, nullptr, false);
        if (doc.is_discarded()) continue;
        merger.add("gathered", doc);
        count_sent(doc, text.size());
        received_.push_back(tree_.children[i]);
      }
      if (progressed) continue;
      for (std::size_t i = 0; i < tree_.children.size(); ++i)
        if (!done[i] && g_departures.left(world_[i])) {  // it will not come
          done[i] = true;
          --left;
        }
      wait.pause();
    }
  }

  // Sends `text` to the parent; true once the parent has it (before the deadline).
  bool send_up(const std::string& text) {
    if (text.size() > static_cast<std::size_t>(INT32_MAX)) return false;
    MPI_Request req = MPI_REQUEST_NULL;
    if (PMPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, tree_.parent, kTagFindings, comm_, &req) !=
        MPI_SUCCESS)
      return false;
    return complete(req, deadline_, parent_world());
  }

  // The parent's verdict: 1 if the findings sent up are in the job's report.
  bool verdict_from_parent() {
    int verdict = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    if (PMPI_Irecv(&verdict, 1, MPI_INT, tree_.parent, kTagVerdict, comm_, &req) != MPI_SUCCESS) return false;
    return complete(req, verdict_deadline_, parent_world()) && verdict == 1;
  }

  // Tells the children it merged whether their findings are in the report.
  void tell_children(bool in_report) {
    const int verdict = in_report ? 1 : 0;
    std::vector<MPI_Request> reqs(received_.size(), MPI_REQUEST_NULL);
    for (std::size_t i = 0; i < received_.size(); ++i)
      if (PMPI_Isend(&verdict, 1, MPI_INT, received_[i], kTagVerdict, comm_, &reqs[i]) != MPI_SUCCESS)
        reqs[i] = MPI_REQUEST_NULL;
    for (MPI_Request& req : reqs)
      if (req != MPI_REQUEST_NULL) complete(req, deadline_, -1);
  }

 private:
  int parent_world() const noexcept { return world_.back(); }
  // Waits for `req` until the deadline, or until `peer` (a world rank, -1: none) is known to have
  // left; one that does not complete is cancelled.
  bool complete(MPI_Request& req, double deadline, int peer) {
    Backoff wait;
    while (now() < deadline && !g_departures.left(peer)) {
      int flag = 0;
      if (PMPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      if (flag) return true;
      wait.pause();
    }
    PMPI_Cancel(&req);
    // A cancel completes at once or not at all (the message went): either way, not waited for.
    int flag = 0;
    PMPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (!flag) PMPI_Request_free(&req);
    return false;
  }

  MPI_Comm comm_;
  double deadline_, verdict_deadline_;
  Tree tree_;
  std::vector<int> world_;  // the children's world ranks, then the parent's (-1: unknown, none)
  std::vector<int> received_;
};

// Names the gathered report's frames here, each distinct one once (symbolize.hpp): what every
// rank would otherwise have done for its own findings at MPI_Finalize.
void symbolize_gathered(reports::Json& doc) {
  std::vector<reports::Json*> refs;
  std::vector<ModuleFrame> frames;
  std::map<std::tuple<std::string, std::uint64_t, bool>, std::size_t> seen;
  std::vector<std::size_t> which;
  auto add = [&](reports::Json& fr) {
    if (!fr.is_object() || reports::truthy(fr, "symbolized")) return;
    const std::string module = reports::text(fr, "module");
    const std::string offset = reports::text(fr, "offset");
    if (module.empty() || offset.empty()) return;
    char* end = nullptr;
    const std::uint64_t off = std::strtoull(offset.c_str(), &end, 0);
    if (!end || *end) return;
    const bool entry = reports::truthy(fr, "entry");
    auto [it, fresh] = seen.emplace(std::make_tuple(module, off, entry), frames.size());
    if (fresh) frames.push_back(ModuleFrame{module, off, entry});
    refs.push_back(&fr);
    which.push_back(it->second);
  };
  if (auto f = doc.find("findings"); f != doc.end() && f->is_array())
    for (reports::Json& x : *f)
      if (auto site = x.find("site"); site != x.end()) add(*site);
  if (auto st = doc.find("stacks"); st != doc.end() && st->is_array())
    for (reports::Json& s : *st)
      if (auto fr = s.find("frames"); fr != s.end() && fr->is_array())
        for (reports::Json& x : *fr) add(x);
  if (frames.empty()) return;
  std::vector<std::uintptr_t> pcs;
  std::unique_ptr<SymbolTable> table = symbolize_frames(frames, &pcs);
  if (!table) return;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const std::uintptr_t pc = pcs[which[i]];
    const SymbolEntry* e = pc ? table->find(pc) : nullptr;
    if (!e) continue;
    reports::Json& fr = *refs[i];
    if (e->function[0]) fr["function"] = e->function;
    if (e->file[0]) {
      fr["file"] = e->file;
      fr["line"] = e->line;
    }
    fr["symbolized"] = true;
  }
}

// Where world rank 0 writes the job's report: report.json for the job the user started,
// job-ID.json for a job started by MPI_Comm_spawn (ID as in its ranks' file names).
std::string job_report_path(const Runtime& r) {
  std::string dir = r.output_dir[0] ? r.output_dir : ".";
  if (!r.run.spawned) return dir + "/report.json";
  std::string id = r.run.job[0] ? r.run.job : "pid" + std::to_string(r.run.pid);
  return dir + "/job-" + id + ".json";
}

// Writes the job's report. Under `mpirun ... attrcheck -- app` a rank's launcher may have merged
// its rank's own report into report.json already (a rank left out of the gather): taken in
// first, under the directory lock the launchers take too.
bool write_job_report(const std::string& path, reports::Json& doc) {
  const std::string dir = path.substr(0, path.rfind('/'));
  const int lock = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock >= 0)
    while (flock(lock, LOCK_EX) != 0 && errno == EINTR) {
    }
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) close(fd);  // (releases the lock)
    }
  } unlock{lock};
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 &&
      (st.st_mtim.tv_sec > g_gather.started.tv_sec ||
       (st.st_mtim.tv_sec == g_gather.started.tv_sec && st.st_mtim.tv_nsec >= g_gather.started.tv_nsec))) {
    try {
      reports::Json earlier = reports::load(path);
      reports::Json mine = doc;
      mine.erase("gathered");
      reports::Merger merger;
      merger.add(path, mine);
      merger.add(path, earlier);
      reports::Json both = merger.result();
      both["gathered"] = doc["gathered"];
      doc = std::move(both);
    } catch (const std::exception&) {
      // An unreadable one is replaced.
    }
  }
  reports::write_atomic(path, reports::dump(doc, 1) + "\n");
  return true;
}

bool gather(Runtime& r) {
  // Every wait ends by `deadline`; a child waits for its verdict longer than its parent waits for
  // its own children (the parent's wait began no earlier than the child's, as a rule).
  const double timeout = static_cast<double>(r.gather_timeout_ms) / 1000.0;
  const double start = now(), deadline = start + timeout, verdict_deadline = deadline + timeout;
  g_hold_until = start + kHoldSeconds;
  // What this rank hands to the gather, as its findings remember it (gathered_count): whether or
  // not the job's report ends up holding it, a report this rank writes later says it, and the
  // merge knows from the job's report which ranks it holds.
  r.findings.mark_gathered();
  std::string mine;
  if (!render_own(r, &mine)) return false;

  Level node(g_gather.node, deadline, verdict_deadline);
  std::unique_ptr<Level> among;
  if (node.root() && g_gather.leaders != MPI_COMM_NULL)
    among = std::make_unique<Level>(g_gather.leaders, deadline, verdict_deadline);
  Level* top = among ? among.get() : &node;
  if (node.leaf() && (!among || among->leaf()) && !top->root()) {
    // A leaf (most ranks: 7 in 8) merges nothing: its own report goes up as it is (the parent's
    // merge takes rank reports as well as merged ones).
    const bool in_report = top->send_up(mine) && top->verdict_from_parent();
    return in_report;
  }
  reports::Json own = reports::Json::parse(mine, nullptr, false);
  if (own.is_discarded()) return false;
  mine.clear();

  reports::Merger merger;
  merger.mark_gathered();
  merger.add("gathered", own);
  own = reports::Json();

  node.gather_children(merger);
  if (among) among->gather_children(merger);
  std::uint64_t bytes = node.bytes + (among ? among->bytes : 0);
  std::uint64_t largest = std::max(node.largest, among ? among->largest : 0);
  bool in_report = false;
  if (top->root()) {  // world rank 0: the job's report
    reports::Json doc = merger.result();
    if (r.symbolize) symbolize_gathered(doc);
    doc["gathered"] = {{"pid", r.run.pid},
                       {"job", r.run.job},
                       {"spawned", r.run.spawned},
                       {"bytes_sent", bytes},
                       {"largest_message", largest},
                       {"seconds", now() - start}};
    if (const std::vector<int> gone = g_departures.gone(); !gone.empty()) doc["gathered"]["left"] = gone;
    try {
      in_report = write_job_report(job_report_path(r), doc);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "attrcheck: cannot write the job's report: %s\n", e.what());
    }
  } else {
    reports::Json doc = merger.result();
    doc["gather_stats"] = {{"bytes", bytes}, {"largest", largest}};
    const std::string text = reports::dump(doc);
    in_report = top->send_up(text) && top->verdict_from_parent();
  }
  if (among) among->tell_children(in_report);
  node.tell_children(in_report);
  return in_report;
}

void free_comm(MPI_Comm* c) {
  if (*c != MPI_COMM_NULL) ATTRCHECK_LIBRARY(PMPI_Comm_free)(c);
  *c = MPI_COMM_NULL;
}

}  // namespace

void prepare_gather() noexcept {
  Runtime& r = state();
  if (g_gather.ready || r.mode == Mode::Off || r.gather_timeout_ms <= 0) return;
  int rank = 0;
  MPI_Comm world = MPI_COMM_NULL, node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  if (ATTRCHECK_LIBRARY(PMPI_Comm_dup)(MPI_COMM_WORLD, &world) != MPI_SUCCESS) return;
  PMPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  PMPI_Comm_rank(world, &rank);
  int node_rank = 0;
  bool ok = ATTRCHECK_LIBRARY(PMPI_Comm_split_type)(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
            node != MPI_COMM_NULL;
  if (ok) {
    PMPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
    PMPI_Comm_rank(node, &node_rank);
    ok = ATTRCHECK_LIBRARY(PMPI_Comm_split)(world, node_rank == 0 ? 0 : MPI_UNDEFINED, rank, &leaders) == MPI_SUCCESS;
    if (ok && leaders != MPI_COMM_NULL) PMPI_Comm_set_errhandler(leaders, MPI_ERRORS_RETURN);
  }
  if (!ok) {
    free_comm(&leaders);
    free_comm(&node);
    free_comm(&world);
    return;
  }
  clock_gettime(CLOCK_REALTIME, &g_gather.started);
  g_gather.world = world;
  g_gather.node = node;
  g_gather.leaders = leaders;
  g_gather.ready = true;
}

bool gather_prepared() noexcept { return g_gather.ready; }

bool gather_job_report() noexcept {
  if (!g_gather.ready) return false;
  Runtime& r = state();
  g_gather.ready = false;  // once
  bool in_report = false;
  try {
    in_report = gather(r);
  } catch (...) {  // (allocation, JSON): the rank's own report instead
    in_report = false;
  }
  g_hold_until = 0;
  if (in_report) r.gathered_version = r.findings.version();
  return in_report;
}

}  // namespace attrcheck::rt
