// The merge itself (merge.hpp): reports folded one at a time into findings keyed by rule, call,
// site and message, with their ranks and counts, and a stack depot holding each stack once.
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

const char* const kSeverities[] = {"error", "warning", "info"};

int severity_index(const std::string& s) {
  for (int i = 0; i < 3; ++i)
    if (s == kSeverities[i]) return i;
  return 3;
}

// A set of ranks: runs of consecutive ranks (a job of 10^6 ranks with a finding on every rank is
// one run), and None (a rank nobody knows) at most once.
struct RankSet {
  std::map<std::int64_t, std::int64_t> runs;  // first -> last
  bool none = false;
  void add_run(std::int64_t lo, std::int64_t hi) {
    auto it = runs.upper_bound(lo);
    if (it != runs.begin()) {
      auto p = std::prev(it);
      if (p->second >= lo || (p->second < INT64_MAX && p->second + 1 == lo)) {
        lo = p->first;
        hi = std::max(hi, p->second);
        it = runs.erase(p);
      }
    }
    while (it != runs.end() && (it->first <= hi || (hi < INT64_MAX && it->first == hi + 1))) {
      hi = std::max(hi, it->second);
      it = runs.erase(it);
    }
    runs.emplace(lo, hi);
  }
  void add(const Json* r) {
    std::int64_t lo = 0, hi = 0;
    if (r != nullptr && rank_run(*r, &lo, &hi)) add_run(lo, hi);
    else none = true;
  }
  void add_all(const Json& ranks) {
    if (!ranks.is_array()) return;
    for (const Json& r : ranks) add(&r);
  }
  Json sorted() const {
    Json out = Json::array();
    for (const auto& [lo, hi] : runs) {
      if (hi - lo >= 2) {
        out.push_back(Json::array({lo, hi}));
      } else {
        out.push_back(lo);
        if (hi != lo) out.push_back(hi);
      }
    }
    if (none) out.push_back(nullptr);
    return out;
  }
};

// Where a finding's text comes from when several ranks have it: the lowest rank (of the job the
// user started, then of spawned jobs by job): the same whatever order the reports come in.
using Origin = std::tuple<int, std::string, std::int64_t>;

}  // namespace

struct Merger::State {
  struct Entry {
    std::string key;
    int severity = 3;
    Json finding;
    Origin origin{1, "", INT64_MAX};
    std::int64_t count = 0;
    RankSet ranks;
    std::map<std::string, RankSet> spawned;
  };
  explicit State(std::size_t max) : max_findings(max) {}
  std::size_t max_findings;
  bool gathered = false;
  std::vector<Json> ranks;
  std::vector<Json> old_suppressed;  // suppressed entries of reports that did not keep them whole
  std::vector<Json> gathers;         // how the jobs' gathered reports merged in were gathered
  std::vector<Entry> entries;
  std::unordered_map<std::string, std::size_t> index;
  // The stacks the findings refer to: each distinct one once (by module and offset, the same in
  // every rank; a Python frame by file, line and function); renumbered in the result.
  std::unordered_map<std::string, std::int64_t> depot_ids;
  std::vector<Json> stacks;  // id - 1 -> frames
  // What is past max_findings: counted, by severity, and the keys and sites seen there (bounded).
  struct More {
    std::int64_t findings = 0, sites = 0, count = 0;
    std::int64_t by_severity[3] = {0, 0, 0};
    std::map<std::string, int> keys;  // -> severity
    std::set<std::string> site_keys;
  } more;
  static constexpr std::size_t kMoreKeys = 100000;

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
    if (fresh) stacks.push_back(frames);
    return it->second;
  }

  // Points a finding's stack references (its own and its provenance's) at the merged depot.
  void restack_one(Json& d, const std::unordered_map<std::int64_t, const Json*>& table, LazyStacks* lazy) {
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
  void restack(Json& f, const std::unordered_map<std::int64_t, const Json*>& table, LazyStacks* lazy) {
    restack_one(f, table, lazy);
    if (auto p = f.find("provenance"); p != f.end() && truthy(&*p) && p->is_array())
      for (Json& prov : *p)
        if (prov.is_object()) restack_one(prov, table, lazy);
  }

  static std::string site_key(const Json& f) {
    const Json* site = member(f, "site");
    static const Json kEmpty = Json::object();
    const Json& st = site && site->is_object() ? *site : kEmpty;
    const Json* py = member(st, "python");
    return text(st, "module") + '\0' + text(st, "offset") + (py ? '\0' + dump(*py) : std::string());
  }
  void count_more(const std::string& key, const std::string& site, int severity, std::int64_t count,
                  bool counted_elsewhere) {
    more.count = add_sat(more.count, count);
    if (severity < 3) more.by_severity[severity] = add_sat(more.by_severity[severity], count);
    if (counted_elsewhere) return;
    if (more.keys.size() < kMoreKeys ? more.keys.emplace(key, severity).second : true)
      more.findings = add_sat(more.findings, 1);
    if (more.site_keys.size() < kMoreKeys ? more.site_keys.insert(site).second : true) more.sites = add_sat(more.sites, 1);
  }
  // Keeps the max_findings entries that sort first; the others are counted in `more`.
  void trim() {
    if (max_findings == 0 || entries.size() <= max_findings) return;
    std::vector<std::size_t> order(entries.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
      return std::tie(entries[a].severity, entries[a].key) < std::tie(entries[b].severity, entries[b].key);
    });
    std::vector<Entry> kept;
    kept.reserve(max_findings);
    for (std::size_t k = 0; k < order.size(); ++k) {
      Entry& e = entries[order[k]];
      if (k < max_findings) kept.push_back(std::move(e));
      else count_more(e.key, site_key(e.finding), e.severity, e.count, false);
    }
    entries = std::move(kept);
    index.clear();
    for (std::size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].key, i);
  }
};

Merger::Merger(std::size_t max_findings) : s_(std::make_unique<State>(max_findings)) {}
Merger::~Merger() = default;
void Merger::mark_gathered() { s_->gathered = true; }

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
    bool covered = false;  // its findings up to "gathered_count" are in a gathered report merged before
    static const Json kEmpty = Json::object();
    const bool merged_input = text(data, "schema") == kMergedSchema;
    if (merged_input) {
      if (const Json* ranks = member(data, "ranks"); ranks && ranks->is_array())
        for (const Json& r : *ranks) s_->ranks.push_back(r);
      if (const Json* g = member(data, "gathered"); g && g->is_object()) s_->gathers.push_back(*g);
      if (const Json* gs = member(data, "gathers"); gs && gs->is_array())
        for (const Json& g : *gs) s_->gathers.push_back(g);
      if (const Json* more = member(data, "more"); more && more->is_object()) {
        s_->more.findings = add_sat(s_->more.findings, integer(*more, "findings", 0));
        s_->more.sites = add_sat(s_->more.sites, integer(*more, "sites", 0));
        s_->more.count = add_sat(s_->more.count, integer(*more, "count", 0));
        if (const Json* sev = member(*more, "summary"))
          for (int i = 0; i < 3; ++i)
            s_->more.by_severity[i] = add_sat(s_->more.by_severity[i], integer(*sev, kSeverities[i], 0));
      }
    } else {
      const Json* run_p = member(data, "run");
      const Json& run = run_p && run_p->is_object() ? *run_p : kEmpty;
      rank = member(run, "rank");
      job = job_of(run);
      auto value = [&run](const char* key) {
        const Json* v = member(run, key);
        return v ? *v : Json();
      };
      // A rank the gathered report holds already: this report says what came after.
      if (!s_->gathered && is_int(rank)) {
        for (const Json& r : s_->ranks) {
          if (!truthy(r, "gathered") || job_of(r) != job) continue;
          const Json* ranks = member(r, "ranks");
          if (ranks ? has_rank(*ranks, rank->get<std::int64_t>()) : (is_int(member(r, "rank")) &&
                                                                     integer(r, "rank", -1) == rank->get<std::int64_t>())) {
            covered = true;
            break;
          }
        }
      }
      Json entry = {{"rank", value("rank")}, {"size", value("size")}, {"pid", value("pid")},
                    {"status", value("status")}, {"signal", member(run, "signal") ? value("signal") : Json(0)},
                    {"mode", value("mode")}, {"file", basename(path)}};
      if (truthy(run, "thread_level")) entry["thread_level"] = value("thread_level");
      if (s_->gathered) {
        entry.erase("pid");
        entry.erase("file");
        entry["gathered"] = true;
      }
      if (const Json* spawned = member(run, "spawned")) {
        entry["job"] = truthy(run, "job") ? value("job") : (s_->gathered && truthy(spawned) ? Json(job) : Json());
        entry["spawned"] = truthy(spawned);
      }
      if (const Json* counts = member(data, "intercepted"); counts && counts->is_object())
        entry["intercepted"] = *counts;
      if (covered) {
        // Its entry is the gathered report's; this one only if it ended otherwise than finalized
        // (a signal at exit), for what the run's end says of it.
        entry["after_gathered"] = true;
        entry.erase("intercepted");
        if (text(entry, "status") != "finalized") s_->ranks.push_back(std::move(entry));
      } else {
        s_->ranks.push_back(std::move(entry));
      }
    }
    // A rank report's findings all come from its rank; a merged report's from their lowest ranks.
    const Origin here{job.empty() ? 0 : 1, job, is_int(rank) ? rank->get<std::int64_t>() : INT64_MAX};
    auto lowest = [](const Json* ranks) {
      std::int64_t low = INT64_MAX;
      if (ranks) for_each_rank_range(*ranks, [&low](std::int64_t lo, std::int64_t) { low = std::min(low, lo); });
      return low;
    };
    auto origin_of = [&](const Json& f) -> Origin {
      if (!merged_input) return here;
      if (const std::int64_t low = lowest(member(f, "ranks")); low != INT64_MAX) return {0, "", low};
      Origin best{1, "", INT64_MAX};
      if (const Json* sp = member(f, "spawned_ranks"); sp && sp->is_array())
        for (const Json& x : *sp) best = std::min(best, Origin{1, text(x, "job"), lowest(member(x, "ranks"))});
      return best;
    };
    auto fold = [&](const Json* whole, const std::string& key, std::int64_t count, const Json& f_for_ranks) {
      if (covered && whole != nullptr) count -= std::max<std::int64_t>(0, integer(*whole, "gathered_count", 0));
      if (count <= 0 && covered) return;
      int severity = whole ? severity_index(text(*whole, "severity")) : 3;
      if (auto d = s_->more.keys.find(key); d != s_->more.keys.end()) {  // past the cap already
        s_->count_more(key, "", d->second, count, true);
        return;
      }
      auto [it, fresh] = s_->index.emplace(key, s_->entries.size());
      Origin origin = whole ? origin_of(*whole) : Origin{1, "", INT64_MAX};
      if (fresh) {
        State::Entry e;
        e.key = key;
        e.severity = severity;
        s_->entries.push_back(std::move(e));
      }
      State::Entry& e = s_->entries[it->second];
      if (whole != nullptr && (fresh || origin < e.origin)) {
        e.finding = Json::object();
        for (const auto& [k, v] : whole->items())
          if (k != "rank" && k != "ranks" && k != "count" && k != "spawned_ranks" && k != "gathered_count" &&
              k != "suppression" && k != "default")
            e.finding[k] = v;
        s_->restack(e.finding, table, lazy);
        e.origin = origin;
        e.severity = severity;
      }
      e.count = add_sat(e.count, count);
      const Json* ranks = member(f_for_ranks, "ranks");
      if (!job.empty()) {
        e.spawned[job].add(rank);
      } else if ((rank != nullptr && !rank->is_null()) || ranks == nullptr) {
        e.ranks.add(rank);
      } else {
        e.ranks.add_all(*ranks);
        if (const Json* sp = member(f_for_ranks, "spawned_ranks"); sp && sp->is_array()) {
          for (const Json& s : *sp) {
            RankSet& set = e.spawned[text(s, "job")];
            if (const Json* rs = member(s, "ranks")) set.add_all(*rs);
          }
        }
      }
    };
    if (keys != nullptr && lazy != nullptr) {
      // A rank report read quickly: a finding's text is parsed only when it is a new one, or
      // when the rank's is the text to keep (a lower rank than the one kept).
      static const Json kNoRanks = Json::object();
      for (const FindingKey& k : *keys) {
        if (k.whole || covered) {
          Json f = lazy->parse_range(k.begin, k.end);
          fold(&f, finding_key(f), integer(f, "count", 1), f);
          continue;
        }
        auto known = s_->index.find(k.key);
        if (s_->more.keys.count(k.key) == 0 &&
            (known == s_->index.end() || here < s_->entries[known->second].origin)) {
          Json f = lazy->parse_range(k.begin, k.end);
          fold(&f, k.key, k.count, kNoRanks);
        } else {
          fold(nullptr, k.key, k.count, kNoRanks);
        }
      }
    } else {
      auto fold_all = [&](const char* list) {
        const Json* findings = member(data, list);
        if (!findings || !findings->is_array()) return;
        for (const Json& f : *findings) {
          if (!f.is_object()) continue;
          // A suppressed finding of a merged report is merged again only whole (older reports
          // kept just its rule, message and count there).
          if (std::strcmp(list, "suppressed") == 0 && !member(f, "site")) {
            s_->old_suppressed.push_back(f);
            continue;
          }
          fold(&f, finding_key(f), integer(f, "count", 1), f);
        }
      };
      fold_all("findings");
      if (merged_input) fold_all("suppressed");
    }
    if (s_->max_findings && s_->entries.size() > 2 * s_->max_findings) s_->trim();
  } catch (const Json::exception& e) {
    throw ReportError(path + ": not a usable report: " + e.what());
  }
}

namespace {

// Adds `counts` ("intercepted": family -> binding -> n) into `into`.
void add_counts(Json& into, const Json* counts) {
  if (!counts || !counts->is_object()) return;
  for (const auto& [family, bindings] : counts->items()) {
    if (!bindings.is_object()) continue;
    for (const auto& [binding, n] : bindings.items())
      if (is_int(&n)) {
        Json& sum = into[family][binding];
        sum = add_sat(sum.is_number_integer() ? sum.get<std::int64_t>() : 0, n.get<std::int64_t>());
      }
  }
}

// Consecutive entries of a gathered job that ended the same way, as one entry.
std::vector<Json> group_gathered(std::vector<Json> ranks) {
  std::vector<Json> out;
  auto same = [](const Json& a, const Json& b) {
    for (const char* k : {"size", "status", "signal", "mode", "thread_level", "job", "spawned"}) {
      const Json* x = member(a, k);
      const Json* y = member(b, k);
      if ((x == nullptr) != (y == nullptr) || (x && *x != *y)) return false;
    }
    return true;
  };
  auto first_last = [](const Json& e, std::int64_t* lo, std::int64_t* hi) {
    if (const Json* r = member(e, "rank"); is_int(r)) {
      *lo = *hi = r->get<std::int64_t>();
      return true;
    }
    const Json* rs = member(e, "ranks");
    if (rs == nullptr || !rs->is_array() || rs->size() != 1) return false;
    bool one = false;
    for_each_rank_range(*rs, [&](std::int64_t a, std::int64_t b) {
      *lo = a;
      *hi = b;
      one = true;
    });
    return one;
  };
  for (Json& e : ranks) {
    std::int64_t lo = 0, hi = 0;
    if (!truthy(e, "gathered") || !first_last(e, &lo, &hi)) {
      out.push_back(std::move(e));
      continue;
    }
    std::int64_t plo = 0, phi = 0;
    if (!out.empty() && truthy(out.back(), "gathered") && same(out.back(), e) && first_last(out.back(), &plo, &phi) &&
        phi < INT64_MAX && phi + 1 == lo) {
      Json& g = out.back();
      Json counts = Json::object();
      add_counts(counts, member(g, "intercepted"));
      add_counts(counts, member(e, "intercepted"));
      g.erase("rank");
      g["ranks"] = Json::array({Json::array({plo, hi})});
      if (!counts.empty()) g["intercepted"] = std::move(counts);
      continue;
    }
    out.push_back(std::move(e));
  }
  // An entry of one rank stays {"rank": N}; the ranks of a group are written first in it.
  for (Json& e : out) {
    if (!member(e, "ranks")) continue;
    Json g = {{"ranks", e["ranks"]}};
    for (const auto& [k, v] : e.items())
      if (k != "ranks") g[k] = v;
    e = std::move(g);
  }
  return out;
}

}  // namespace

Json Merger::result(const std::optional<std::vector<std::string>>& command, std::optional<int> exit_code) {
  s_->trim();
  std::vector<std::size_t> order(s_->entries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<std::tuple<int, std::string, const std::string*>> keys;
  keys.reserve(order.size());
  for (const auto& e : s_->entries) keys.emplace_back(e.severity, text(e.finding, "rule"), &e.key);
  std::sort(order.begin(), order.end(), [&keys](std::size_t a, std::size_t b) {
    return std::tie(std::get<0>(keys[a]), std::get<1>(keys[a]), *std::get<2>(keys[a])) <
           std::tie(std::get<0>(keys[b]), std::get<1>(keys[b]), *std::get<2>(keys[b]));
  });
  Json findings = Json::array();
  std::int64_t totals[3] = {0, 0, 0};
  // The stacks the findings use, numbered from 1 in the order they are first used.
  std::unordered_map<std::int64_t, std::int64_t> renumber;
  Json stacks = Json::array();
  auto use = [&](Json& d) {
    auto it = d.find("stack");
    if (it == d.end() || !is_int(&*it)) return;
    const std::int64_t old = it->get<std::int64_t>();
    if (old < 1 || old > static_cast<std::int64_t>(s_->stacks.size())) return;
    auto [r, fresh] = renumber.emplace(old, static_cast<std::int64_t>(stacks.size()) + 1);
    if (fresh) stacks.push_back(Json{{"id", r->second}, {"frames", s_->stacks[static_cast<std::size_t>(old - 1)]}});
    *it = r->second;
  };
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
    use(f);
    if (auto p = f.find("provenance"); p != f.end() && p->is_array())
      for (Json& prov : *p)
        if (prov.is_object()) use(prov);
    if (e.severity < 3) totals[e.severity] = add_sat(totals[e.severity], e.count);
    findings.push_back(std::move(f));
  }
  for (int i = 0; i < 3; ++i) totals[i] = add_sat(totals[i], s_->more.by_severity[i]);
  auto rank_order = [](const Json& r) {
    const Json* rank = member(r, "rank");
    std::int64_t first = is_int(rank) ? rank->get<std::int64_t>() : 0;
    bool known = is_int(rank);
    if (const Json* rs = member(r, "ranks"))
      for_each_rank_range(*rs, [&](std::int64_t lo, std::int64_t) {
        if (!known) first = lo;
        known = true;
      });
    return std::make_tuple(truthy(r, "spawned"), text(r, "job"), !known, first, truthy(r, "after_gathered"));
  };
  std::stable_sort(s_->ranks.begin(), s_->ranks.end(),
                   [&rank_order](const Json& a, const Json& b) { return rank_order(a) < rank_order(b); });
  std::vector<Json> ranks = group_gathered(std::move(s_->ranks));
  Json out = {{"schema", kMergedSchema}, {"version", kVersion}, {"tool", {{"name", "attrcheck"}}}};
  // What the ranks intercepted, added up (ranks rebuilt from a journal alone did not say).
  Json intercepted = Json::object();
  for (const Json& r : ranks) add_counts(intercepted, member(r, "intercepted"));
  out["ranks"] = Json(std::move(ranks));
  if (!intercepted.empty()) out["intercepted"] = std::move(intercepted);
  out["summary"] = {{"error", totals[0]}, {"warning", totals[1]}, {"info", totals[2]}};
  out["findings"] = std::move(findings);
  if (s_->more.count || s_->more.findings) {
    const auto& m = s_->more;
    out["more"] = {{"findings", m.findings}, {"sites", m.sites}, {"count", m.count},
                   {"summary", {{"error", m.by_severity[0]}, {"warning", m.by_severity[1]}, {"info", m.by_severity[2]}}},
                   {"cap", s_->max_findings}};
  }
  out["stacks"] = std::move(stacks);
  if (!s_->old_suppressed.empty()) out["suppressed"] = Json(std::move(s_->old_suppressed));
  if (!s_->gathers.empty()) out["gathers"] = Json(std::move(s_->gathers));
  if (command) out["command"] = *command;
  if (exit_code) out["exit_code"] = *exit_code;
  const std::size_t max = s_->max_findings;
  s_ = std::make_unique<State>(max);
  return out;
}

}  // namespace attrcheck::reports
