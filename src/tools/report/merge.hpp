// Merging reports: per-rank (or already merged) reports folded into one merged report, a
// finding per distinct (rule, call, site, message), with the ranks it happened on and its
// count; each distinct stack stored once. Run directories are merged by the launcher (under a
// lock: in `mpirun attrcheck -- app` every rank's launcher merges) and by attrcheck-report.
#pragma once

#include "report/json.hpp"
#include "report/load.hpp"
#include "report/suppress.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attrcheck::reports {

// Folds reports into one merged report, one at a time (4096 ranks are never all in memory).
class Merger {
 public:
  Merger();
  ~Merger();
  Merger(const Merger&) = delete;
  Merger& operator=(const Merger&) = delete;
  // data's findings and stacks, or (load_for_merge) those `keys` and `lazy` read from its file.
  void add(const std::string& path, const Json& data, LazyStacks* lazy = nullptr,
           const std::vector<FindingKey>* keys = nullptr);
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

// Merges a run directory's reports into DIR/report.json (symbolized, suppressions applied);
// returns the merged report. With lock, concurrent mergers take turns.
Json merge_directory(const std::string& dir, const std::optional<std::vector<std::string>>& command,
                     std::optional<int> exit_code, bool lock, const std::vector<Suppression>& suppressions);

// Whether every rank of the run (by the reports' world size) has a report in merged (the job
// the user started; a rank known from its journal alone has not finished).
bool complete(const Json& merged);
// True for exactly one caller per run directory and `what` (an O_EXCL marker file).
bool claim_once(const std::string& dir, const std::string& what);
// Writes text via a temporary file and a rename; refuses to replace a file unless overwrite.
void write_atomic(const std::string& path, const std::string& text, bool overwrite = true);
// The spawned job a rank entry's process belongs to ("" for the job the user started).
std::string job_of(const Json& run);

}  // namespace attrcheck::reports
