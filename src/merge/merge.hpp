// Merging reports: per-rank (or already merged) reports folded into one merged report, a
// finding per distinct (rule, call, site, message), with the ranks it happened on and its
// count; each distinct stack stored once. Run directories are merged by the launcher (under a
// lock: in `mpirun attrcheck -- app` every rank's launcher merges) and by attrcheck-report.
#pragma once

#include "merge/json.hpp"
#include "merge/load.hpp"
#include "merge/suppress.hpp"

#include <ctime>
#include <memory>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace attrcheck::reports {

// How many distinct findings a merged report holds at most. Past it, the findings that sort last
// (infos before warnings before errors; then by rule, call, site and message) are counted in the
// report's "more" instead: its counts by severity are exact, its numbers of findings and sites
// are upper bounds where parts were merged apart (a job's gathered report) and exact otherwise.
inline constexpr std::size_t kMaxFindings = 2000;

// Folds reports into one merged report, one at a time (4096 ranks are never all in memory).
// The result does not depend on the order the reports come in: findings are in a fixed order,
// each with the text (message, site, keyval) of the lowest rank it happened on, and the stacks
// numbered in the order the findings use them.
class Merger {
 public:
  explicit Merger(std::size_t max_findings = kMaxFindings);
  ~Merger();
  Merger(const Merger&) = delete;
  Merger& operator=(const Merger&) = delete;
  // data's findings and stacks, or (load_for_merge) those `keys` and `lazy` read from its file.
  // A merged report's own findings and suppressed findings are merged again (its suppressions are
  // applied anew). A rank report of a rank whose findings a gathered report added before holds
  // only what came after: of each finding, what exceeds its "gathered_count".
  void add(const std::string& path, const Json& data, LazyStacks* lazy = nullptr,
           const std::vector<FindingKey>* keys = nullptr);
  // Rank reports added from now on are ranks of a job's gathered report: their entries in the
  // merged "ranks" say "gathered": true, without file or pid, and consecutive ranks that ended
  // the same way are one entry ("ranks": [[first, last]]).
  void mark_gathered();
  Json result(const std::optional<std::vector<std::string>>& command = std::nullopt,
              std::optional<int> exit_code = std::nullopt);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Loads and merges report files (parsed on every core, folded in order). A file that cannot be
// read is an error, or with tolerate_broken (a run directory, where a rank may have died
// mid-write) a rank entry saying so.
Json merge_files(const std::vector<std::string>& paths,
                 const std::optional<std::vector<std::string>>& command = std::nullopt,
                 std::optional<int> exit_code = std::nullopt, bool tolerate_broken = false);

// Whether a merged report is a job's gathered report as its rank 0 wrote it (not merged since).
bool is_gathered(const Json& report);

// Which files of a run directory a merge reads, and what it does with them.
struct DirectoryMerge {
  // Remove the per-rank reports, journals and spawned jobs' gathered reports once they are in
  // report.json, which is then merged again with whatever comes later (the launcher).
  bool consume = false;
  // Only the files process `only_pid` wrote (a rank's own launcher, `mpirun attrcheck -- app`).
  // Without it (consume: every process has ended), also the temporaries of writes cut short (a
  // rank killed while writing its report) are removed.
  std::optional<long> only_pid;
  // A report.json older than this is an earlier run's: not merged in.
  std::optional<struct timespec> since;
};
// Merges a run directory into DIR/report.json (symbolized, suppressions applied) and returns it:
// report.json itself where it is a gathered report or (consume) an earlier merge of this run, the
// spawned jobs' gathered reports (job-ID.json), the per-rank reports and the journals of ranks
// that wrote none. Concurrent merges take turns (a lock on the directory). `completed`: whether
// this merge made the report complete (it was not before).
Json merge_directory(const std::string& dir, const std::optional<std::vector<std::string>>& command,
                     std::optional<int> exit_code, const DirectoryMerge& how,
                     const std::vector<Suppression>& suppressions, bool* completed = nullptr);

// Whether every rank of the run (by the reports' world size) has a report in merged (the job
// the user started; a rank known from its journal alone has not finished).
bool complete(const Json& merged);

// A finding's "ranks" as the merged report writes them: rank numbers, [first, last] for three or
// more consecutive ones, null for a rank nobody knows. Calls f(first, last) for each run of ranks.
// One item of such a list as a run: a rank number as [n, n], [first, last] as is; false for
// anything else (null, a malformed item).
inline bool rank_run(const Json& item, std::int64_t* first, std::int64_t* last) {
  if (is_int(&item)) {
    *first = *last = item.get<std::int64_t>();
    return true;
  }
  if (!item.is_array() || item.size() != 2 || !is_int(&item[0]) || !is_int(&item[1])) return false;
  *first = item[0].get<std::int64_t>();
  *last = item[1].get<std::int64_t>();
  return *first <= *last;
}
template <typename F>
void for_each_rank_range(const Json& ranks, F&& f) {
  if (!ranks.is_array()) return;
  std::int64_t lo = 0, hi = 0;
  for (const Json& r : ranks)
    if (rank_run(r, &lo, &hi)) f(lo, hi);
}
bool has_rank(const Json& ranks, std::int64_t rank);
// The ranks an entry of the merged report's "ranks" stands for: 1, or those of its "ranks".
std::int64_t ranks_in_entry(const Json& entry);
// "3", or "0-255,300" for an entry standing for several ranks; "None" where unknown.
std::string entry_ranks_text(const Json& entry);
// Writes text via a temporary file and a rename; refuses to replace a file unless overwrite.
void write_atomic(const std::string& path, const std::string& text, bool overwrite = true);
// The spawned job a rank entry's process belongs to ("" for the job the user started).
std::string job_of(const Json& run);

}  // namespace attrcheck::reports
