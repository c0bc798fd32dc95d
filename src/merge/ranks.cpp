// A merged report's rank lists (merge.hpp): runs of consecutive ranks, and the spawned job a
// rank's entry belongs to.
#include "merge/merge.hpp"

#include <cstdint>
#include <string>

namespace attrcheck::reports {

bool has_rank(const Json& ranks, std::int64_t rank) {
  bool found = false;
  for_each_rank_range(ranks, [&](std::int64_t lo, std::int64_t hi) { found = found || (lo <= rank && rank <= hi); });
  return found;
}

std::int64_t ranks_in_entry(const Json& entry) {
  const Json* ranks = member(entry, "ranks");
  if (ranks == nullptr) return 1;
  std::int64_t n = 0;
  for_each_rank_range(*ranks, [&](std::int64_t lo, std::int64_t hi) { n = add_sat(n, hi - lo + 1); });
  return n;
}

std::string entry_ranks_text(const Json& entry) {
  const Json* ranks = member(entry, "ranks");
  if (ranks == nullptr) {
    const Json* r = member(entry, "rank");
    return r ? py_str(*r) : "None";
  }
  std::string out;
  for_each_rank_range(*ranks, [&](std::int64_t lo, std::int64_t hi) {
    if (!out.empty()) out += ",";
    out += std::to_string(lo);
    if (hi != lo) out += "-" + std::to_string(hi);
  });
  return out.empty() ? "None" : out;
}

std::string job_of(const Json& run) {
  if (!truthy(run, "spawned")) return "";
  if (truthy(run, "job")) return text(run, "job");
  const Json* pid = member(run, "pid");
  return "pid" + (pid ? py_str(*pid) : std::string("None"));
}

}  // namespace attrcheck::reports
