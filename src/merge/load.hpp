// Reading reports: a rank's report (rank-N.json), its journal (rank-N.journal: findings as they
// were found, the rank's only record when it was killed), a merged report (report.json), and the
// files of a run directory.
#pragma once

#include "merge/json.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attrcheck::reports {

inline constexpr const char* kRankSchema = "attrcheck.rank-report";
inline constexpr const char* kJournalSchema = "attrcheck.rank-journal";
inline constexpr const char* kMergedSchema = "attrcheck.report";
inline constexpr int kSupportedMajor = 1;
inline constexpr const char* kVersion = "1.8";
// Deeper JSON than this is refused when read: nothing attrcheck writes nests past a handful of
// levels, and the tools copy and print values recursively.
inline constexpr int kMaxDepth = 256;

// A Python frame of a stack (report schema 1.6): {"python": true, "file", "line", "function"}.
inline bool is_python_frame(const Json& frame) { return frame.is_object() && truthy(frame, "python"); }

// The file's bytes (ReportError "PATH: strerror" when it cannot be read).
std::string read_file(const std::string& path);
// Parses JSON text; malformed text is a ReportError "PATH:LINE:COLUMN: not valid JSON: ...".
Json parse(const std::string& path, const std::string& text);
// A rank report's stacks, read when the merge needs them: most of a rank report's bytes are its
// stacks, and once the first ranks are merged, the others' findings name stacks the merged report
// holds already. Each stack is parsed (nlohmann) the first time it is asked for; a malformed one
// is a ReportError naming the file, line and column.
class LazyStacks {
 public:
  LazyStacks(std::string path, std::string text, std::vector<std::pair<std::size_t, std::size_t>> elements);
  // The frames of stack `id`, or nullptr when the report has no such stack.
  const Json* frames(std::int64_t id);
  // The JSON text at [begin, end) of the file, parsed (errors name the file, line and column).
  Json parse_range(std::size_t begin, std::size_t end) const;
  const std::string& text() const { return text_; }
  // A malformed stack then reads as none (a run directory, where a rank may have died mid-write).
  void tolerate() { tolerate_ = true; }

 private:
  bool tolerate_ = false;
  const Json& element(std::size_t index);
  std::string path_, text_;
  std::vector<std::pair<std::size_t, std::size_t>> elements_;  // [begin, end) of each array element
  std::vector<std::unique_ptr<Json>> parsed_;
  bool indexed_ = false;
  std::vector<std::pair<std::int64_t, std::size_t>> by_id_;
};

// A finding of a rank report as the merge first needs it: what makes it the same finding as
// another (key), its count, and where its text is; parsed whole only when it is a new one, or
// when it has something the quick reading does not handle (whole).
struct FindingKey {
  std::string key;
  std::int64_t count = 1;
  bool whole = false;
  std::size_t begin = 0, end = 0;
};
// What makes two findings the same: rule, call, site module and offset, and the message with
// hexadecimal numbers (addresses, handles: they differ between ranks) left out.
std::string finding_key(const Json& f);

// A report as the merge reads it: a rank report without a journal has its findings and stacks
// left in the text (findings: their keys, split: true; stacks), every other report is whole in
// data.
struct Loaded {
  Json data;
  std::unique_ptr<LazyStacks> stacks;
  bool split = false;
  std::vector<FindingKey> findings;
};
Loaded load_for_merge(const std::string& path);

// The JSON text at [begin, end) of text, parsed; a ReportError names path, line and column.
Json parse_range(const std::string& path, const std::string& text, std::size_t begin, std::size_t end);

// A per-rank or merged report, checked to be one and of a version this tool reads. A journal is
// loaded as the rank report it stands for; a rank report gets the findings its journal recorded
// after the report was written.
Json load(const std::string& path);
// The rank report a journal stands for (status "running": the rank never wrote its report).
Json load_journal(const std::string& path);

// A run directory's per-rank reports (rank-N.json, job-ID-rank-N.json, pid-N.json) and the
// journals of ranks that wrote none, in rank order.
std::vector<std::string> rank_files(const std::string& dir);
std::vector<std::string> journal_files(const std::string& dir);
// The gathered reports of spawned jobs (job-ID.json, written by their rank 0).
std::vector<std::string> gathered_files(const std::string& dir);
// Removes an earlier run's per-rank reports, journals and markers from a run directory.
void clean(const std::string& dir);

std::string basename(const std::string& path);
bool ends_with(const std::string& s, const std::string& suffix);
bool exists(const std::string& path);
bool is_dir(const std::string& path);

}  // namespace attrcheck::reports
