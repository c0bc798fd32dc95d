#include "tools/report/outputs.hpp"

#include <map>

namespace attrcheck::reports {

namespace {

// XML escaping as Python's ElementTree writes it.
std::string escape(const std::string& s, bool attribute) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += attribute ? "&#13;" : "\r"; break;
      case '\t': out += attribute ? "&#09;" : "\t"; break;
      default:
        // XML 1.0 has no place for other control characters: they become spaces.
        out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
  }
  return out;
}

std::string attr(const char* name, const std::string& value) {
  return std::string(" ") + name + "=\"" + escape(value, true) + "\"";
}

}  // namespace

std::string junit(const Json& report) {
  std::vector<std::pair<std::string, std::string>> table;  // rule id, severity
  for (const Rule& r : rules()) table.emplace_back(r.id, r.severity);
  std::map<std::string, std::vector<const Json*>> by_rule;
  const Json* findings = member(report, "findings");
  if (findings && findings->is_array())
    for (const Json& f : *findings) {
      if (table.empty()) table.emplace_back(text(f, "rule"), text(f, "severity"));
      by_rule[text(f, "rule")].push_back(&f);
    }
  std::size_t failures = 0;
  for (const auto& [id, sev] : table) failures += by_rule.count(id);
  std::string out = "<?xml version='1.0' encoding='utf-8'?>\n<testsuites>\n";
  out += "  <testsuite" + attr("name", "attrcheck") + attr("tests", std::to_string(table.size())) +
         attr("failures", std::to_string(failures)) + attr("errors", "0") + ">\n";
  for (const auto& [id, sev] : table) {
    std::string head = "    <testcase" + attr("classname", "attrcheck." + id.substr(0, id.find('.'))) + attr("name", id);
    auto it = by_rule.find(id);
    if (it == by_rule.end()) {
      out += head + " />\n";
      continue;
    }
    const auto& found = it->second;
    std::int64_t total = 0;
    for (const Json* f : found) total = add_sat(total, integer(*f, "count", 1));
    std::string body;
    for (const Json* f : found) {
      std::string spawned;
      if (const Json* sp = member(*f, "spawned_ranks"); sp && sp->is_array())
        for (const Json& s : *sp) {
          const Json* job = member(s, "job");
          const Json* ranks = member(s, "ranks");
          spawned += " + job " + (job ? py_str(*job) : "None") + " ranks " + (ranks ? py_repr(*ranks) : "None");
        }
      const Json* count = member(*f, "count");
      const Json* ranks = member(*f, "ranks");
      body += text(*f, "severity", "None") + " x" + (count ? py_str(*count) : "1") + " ranks " +
              (ranks ? py_repr(*ranks) : "[]") + spawned + " at " + location(report, *f) + ": " + text(*f, "message") + "\n";
    }
    std::string hint;
    for (const Rule& r : rules())
      if (id == r.id) hint = r.hint;
    body += "fix: " + text(*found[0], "hint", hint);
    out += head + ">\n      <failure" + attr("type", sev) +
           attr("message", std::to_string(total) + " finding(s): " + text(*found[0], "message")) + ">" +
           escape(body, false) + "</failure>\n    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace attrcheck::reports
