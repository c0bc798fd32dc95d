#include "tools/report/outputs.hpp"

#include "merge/load.hpp"
#include "merge/merge.hpp"

#include <algorithm>
#include <map>

namespace attrcheck::reports {

namespace {

const char* const kSeverities[] = {"error", "warning", "info"};
const Json kEmptyObject = Json::object();
const Json kEmptyArray = Json::array();

const Json& object_at(const Json& obj, const char* key) {
  const Json* v = member(obj, key);
  return v && v->is_object() ? *v : kEmptyObject;
}

const Json& array_at(const Json& obj, const char* key) {
  const Json* v = member(obj, key);
  return v && v->is_array() ? *v : kEmptyArray;
}

std::string value_text(const Json& obj, const char* key, const char* fallback) {
  const Json* v = member(obj, key);
  return v ? py_str(*v) : fallback;
}

// 0,1,2,5 -> 0-2,5
std::string rank_ranges(const Json& ranks) {
  std::vector<std::pair<std::int64_t, std::int64_t>> r;
  for_each_rank_range(ranks, [&r](std::int64_t lo, std::int64_t hi) { r.emplace_back(lo, hi); });
  if (r.empty()) return "-";
  std::sort(r.begin(), r.end());
  std::string out;
  std::size_t i = 0;
  while (i < r.size()) {
    std::int64_t lo = r[i].first, hi = r[i].second;
    while (i + 1 < r.size() && r[i + 1].first <= hi + 1) hi = std::max(hi, r[++i].second);
    if (!out.empty()) out += ",";
    out += std::to_string(lo);
    if (hi > lo) out += "-" + std::to_string(hi);
    ++i;
  }
  return out;
}

// Spawned jobs' ranks follow as 'job ID:0-1'.
std::string ranks_text(const Json& f) {
  std::string text_ = rank_ranges(array_at(f, "ranks"));
  for (const Json& s : array_at(f, "spawned_ranks")) {
    text_ = (text_ == "-" ? "" : text_ + " ") + "job " + value_text(s, "job", "None") + ":" +
            rank_ranges(array_at(s, "ranks"));
  }
  return text_;
}

}  // namespace

std::vector<const Json*> at_or_above(const Json& findings, const std::string& threshold) {
  std::vector<const Json*> out;
  if (threshold == "never" || !findings.is_array()) return out;
  int limit = threshold == "error" ? 0 : threshold == "warning" ? 1 : 2;
  for (const Json& f : findings) {
    std::string s = text(f, "severity");
    for (int i = 0; i <= limit; ++i)
      if (s == kSeverities[i]) out.push_back(&f);
  }
  return out;
}

bool is_user_python_frame(const Json& frame) {
  if (!is_python_frame(frame)) return false;
  // mpi4py's own Python code, the import machinery and runpy (python -m) are trimmed, as the MPI
  // library's own native frames are.
  const std::string file = text(frame, "file");
  return file.find("/mpi4py/") == std::string::npos && file.rfind("<frozen ", 0) != 0 &&
         !ends_with(file, "/runpy.py") && file != "runpy.py";
}

const Json* user_python_frame(const Json& frames) {
  if (!frames.is_array()) return nullptr;
  for (const Json& frame : frames)
    if (is_user_python_frame(frame)) return &frame;
  return nullptr;
}

const Json& first_frame(const Json& frames) {
  if (const Json* py = user_python_frame(frames)) return *py;
  return frames.is_array() && !frames.empty() ? frames[0] : kEmptyObject;
}

std::string frame_text(const Json& frame) {
  if (is_python_frame(frame))  // app.py:12 in make_keyval
    return basename(text(frame, "file")) + ":" + value_text(frame, "line", "0") + " in " + text(frame, "function", "?");
  if (truthy(frame, "file"))
    return (truthy(frame, "function") ? text(frame, "function") : "?") + " (" + basename(text(frame, "file")) + ":" +
           value_text(frame, "line", "0") + ")";
  if (truthy(frame, "function")) return text(frame, "function");
  std::string module = truthy(frame, "module") ? text(frame, "module") : "?";
  return basename(module) + "+" + value_text(frame, "offset", "?");
}

const Json& stack_frames(const Json& report, const Json* stack_id) {
  if (stack_id == nullptr) return kEmptyArray;
  for (const Json& s : array_at(report, "stacks")) {
    const Json* id = member(s, "id");
    if (id && *id == *stack_id) return array_at(s, "frames");
  }
  return kEmptyArray;
}

std::string location(const Json& f) {
  const Json& site = object_at(f, "site");
  if (truthy(site, "file")) {
    std::string fn = truthy(site, "function") ? text(site, "function") : truthy(site, "symbol") ? text(site, "symbol") : "?";
    return fn + " (" + basename(text(site, "file")) + ":" + value_text(site, "line", "?") + ")";
  }
  if (truthy(site, "symbol")) return text(site, "symbol");
  // A fact about the run (a library note, a tool limit), not about a place in the program.
  if (!truthy(site, "module") && value_text(site, "address", "0x0") == "0x0") return "-";
  std::string module = basename(text(site, "module"));
  if (module.empty()) module = "?";
  return module + "+" + value_text(site, "offset", "?");
}

const Json* user_python_site(const Json& report, const Json& finding) {
  if (const Json* py = user_python_frame(stack_frames(report, member(finding, "stack")))) return py;
  const Json* py = member(object_at(finding, "site"), "python");
  if (py && is_user_python_frame(*py)) return py;
  // Found at MPI_Finalize with no Python code running (mpi4py finalizes from the interpreter's
  // exit): the finding is about something made earlier (a leaked keyval, an attribute whose
  // delete callback never runs), and is where that was made, its provenance's first Python line.
  if (text(finding, "call") != "MPI_Finalize") return nullptr;
  for (const Json& p : array_at(finding, "provenance"))
    if (const Json* made = user_python_frame(stack_frames(report, member(p, "stack")))) return made;
  return nullptr;
}

std::string location(const Json& report, const Json& finding) {
  if (const Json* py = user_python_site(report, finding)) return frame_text(*py);
  return location(finding);
}

std::string summary_text(const Json& report) {
  const Json& findings = array_at(report, "findings");
  std::vector<std::string> lines;
  Json s;
  if (truthy(report, "summary") && report["summary"].is_object()) {
    s = report["summary"];
  } else {
    s = Json::object();
    for (const char* k : kSeverities) {
      std::int64_t n = 0;
      for (const Json& f : findings)
        if (text(f, "severity") == k) n = add_sat(n, integer(f, "count", 1));
      s[k] = n;
    }
  }
  const Json& ranks = array_at(report, "ranks");
  std::int64_t rank_count = 0;
  for (const Json& r : ranks)
    if (!truthy(r, "after_gathered")) rank_count = add_sat(rank_count, ranks_in_entry(r));
  std::string more_text;
  if (const Json* more = member(report, "more"); more && more->is_object())
    more_text = "; past the report's " + value_text(*more, "cap", "?") + " findings, " + value_text(*more, "count", "0") +
                " more at up to " + value_text(*more, "findings", "0") + " findings and " + value_text(*more, "sites", "0") +
                " sites are counted only";
  std::string suppressed = truthy(s, "suppressed") ? ", " + value_text(s, "suppressed", "0") + " suppressed" : "";
  std::int64_t by_default = 0;
  for (const Json& x : array_at(report, "suppressed"))
    if (truthy(x, "default")) by_default = add_sat(by_default, integer(x, "count", 1));
  if (by_default) suppressed += " (" + std::to_string(by_default) + " by default suppressions)";
  lines.push_back("attrcheck: " + value_text(s, "error", "0") + " error(s), " + value_text(s, "warning", "0") +
                  " warning(s), " + value_text(s, "info", "0") + " info" + suppressed + " in " +
                  std::to_string(rank_count) + " rank report(s)" + more_text);
  if (const Json* counts = member(report, "intercepted"); counts && counts->is_object()) {
    // One line of what was checked: a report without findings from a run whose calls were never
    // intercepted would look the same as a clean one.
    auto total = [](const Json* per_binding) {
      std::int64_t n = 0;
      if (per_binding && per_binding->is_object())
        for (const auto& [binding, v] : per_binding->items())
          if (is_int(&v)) n = add_sat(n, v.get<std::int64_t>());
      return n;
    };
    std::int64_t by_binding[3] = {0, 0, 0}, all = 0;
    static const char* const kBindings[3] = {"c", "fortran", "f08"};
    for (const auto& [family, per_binding] : counts->items())
      for (int b = 0; b < 3; ++b)
        if (const Json* v = member(per_binding, kBindings[b]); is_int(v)) by_binding[b] = add_sat(by_binding[b], v->get<std::int64_t>());
    for (const std::int64_t n : by_binding) all = add_sat(all, n);
    if (all == 0) {
      lines.push_back("attrcheck: intercepted no keyval, attribute or object call and ran no callback: nothing was checked");
    } else {
      lines.push_back("attrcheck: checked " + std::to_string(total(member(*counts, "keyval"))) + " keyval, " +
                      std::to_string(total(member(*counts, "attribute"))) + " attribute and " +
                      std::to_string(total(member(*counts, "object"))) + " object calls and " +
                      std::to_string(total(member(*counts, "callback"))) + " callbacks (C " +
                      std::to_string(by_binding[0]) + ", Fortran " + std::to_string(by_binding[1]) + ", F08 " +
                      std::to_string(by_binding[2]) + ")");
    }
  }
  for (const Json& r : ranks) {
    const Json* status = member(r, "status");
    if (status == nullptr || status->is_null() || (status->is_string() && *status == "finalized")) continue;
    std::string sig = truthy(r, "signal") ? ", signal " + value_text(r, "signal", "0") : "";
    std::string job = job_of(r);
    lines.push_back(std::string("attrcheck: ") + (member(r, "ranks") ? "ranks " : "rank ") + entry_ranks_text(r) +
                    (job.empty() ? "" : " of spawned job " + job) +
                    " ended " + py_str(*status) + sig);
  }
  if (!findings.empty()) {
    std::vector<std::vector<std::string>> rows = {{"severity", "rule", "count", "ranks", "where", "message"}};
    for (const Json& f : findings)
      rows.push_back({text(f, "severity", "?"), text(f, "rule", "?"), value_text(f, "count", "1"), ranks_text(f),
                      location(report, f), text(f, "message")});
    std::size_t widths[5] = {0, 0, 0, 0, 0};
    for (const auto& r : rows)
      for (int i = 0; i < 5; ++i) widths[i] = std::max(widths[i], r[i].size());
    for (const auto& r : rows) {
      std::string line = " ";
      for (int i = 0; i < 5; ++i) line += " " + r[i] + std::string(widths[i] - r[i].size(), ' ') + " ";
      lines.push_back(line + " " + r[5]);
    }
  }
  // One line per release series where the run would differ (the portability findings' differs_on).
  std::map<std::string, std::map<std::string, std::int64_t>> differs;  // series -> rule -> findings
  for (const Json& f : findings)
    for (const Json& series : array_at(object_at(f, "portability"), "differs_on"))
      if (series.is_string()) ++differs[series.get<std::string>()][text(f, "rule")];
  for (const auto& [series, rules] : differs) {
    std::string line = "attrcheck: on " + series + " this run would differ:";
    bool first = true;
    for (const auto& [rule, n] : rules) {
      line += std::string(first ? " " : ", ") + rule + " (" + std::to_string(n) + (n == 1 ? " site)" : " sites)");
      first = false;
    }
    lines.push_back(line);
  }
  // Like a memory checker's "freed here / allocated here": where what each finding is about came from.
  bool header = false;
  for (const Json& f : findings) {
    if (!truthy(f, "provenance") || !f["provenance"].is_array()) continue;
    if (!header) lines.push_back("provenance:");
    header = true;
    lines.push_back("  " + value_text(f, "rule", "None") + " at " + location(report, f) + ":");
    for (const Json& p : f["provenance"]) {
      const Json& frames = stack_frames(report, member(p, "stack"));
      lines.push_back("    " + value_text(p, "what", "None") + " at " + (frames.empty() ? "?" : frame_text(first_frame(frames))));
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace attrcheck::reports
