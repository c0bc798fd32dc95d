#include "merge/suppress.hpp"

#include "merge/load.hpp"

#include <climits>
#include <fnmatch.h>
#include <unistd.h>
#include <unordered_map>

namespace attrcheck::reports {

namespace {

bool glob(const std::string& pattern, const std::string& value) {
  return ::fnmatch(pattern.c_str(), value.c_str(), 0) == 0;
}

bool rule_chars(const std::string& rule) {
  if (rule.empty()) return false;
  for (char c : rule)
    if (!((c >= 'a' && c <= 'z') || c == '*' || c == '?' || c == '[' || c == ']' || c == '.' || c == '-')) return false;
  return true;
}

std::string strip(const std::string& s) {
  auto a = s.find_first_not_of(" \t\r\n\f\v");
  auto b = s.find_last_not_of(" \t\r\n\f\v");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// A finding's keyval as a keyval: pattern sees it: "copy=C,delete=D,extra_state=E" (report
// schema 1.5, keyval_callbacks); empty where the finding has none.
std::string keyval_text(const Json& finding) {
  const Json* cb = member(finding, "keyval_callbacks");
  if (!cb || !cb->is_object()) return "";
  return "copy=" + text(*cb, "copy") + ",delete=" + text(*cb, "delete") + ",extra_state=" + text(*cb, "extra_state");
}

bool matches(const Suppression& s, const Json& finding, const std::vector<const Json*>& frames) {
  if (!glob(s.rule, text(finding, "rule"))) return false;
  if (s.kind == "keyval") {
    const std::string value = keyval_text(finding);
    return !value.empty() && glob(s.pattern, value);
  }
  for (const Json* frame : frames) {
    std::string value;
    if (s.kind == "at") {
      if (truthy(*frame, "module")) value = text(*frame, "module") + "+" + text(*frame, "offset");
    } else {
      const char* field = s.kind == "fun" ? "function" : s.kind == "lib" ? "module" : "file";
      if (truthy(*frame, field)) value = text(*frame, field);
      else if (s.kind == "fun") {
        std::string symbol = text(*frame, "symbol");
        value = symbol.substr(0, symbol.find('+'));
      }
    }
    if (!value.empty() && glob(s.pattern, value)) return true;
  }
  return false;
}

}  // namespace

std::string data_dir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "lib/attrcheck";
  std::string exe(buf, static_cast<std::size_t>(n));
  std::string bin = exe.substr(0, exe.rfind('/'));
  std::string prefix = bin.substr(0, bin.rfind('/'));
  return prefix + "/lib/attrcheck";
}

std::vector<Suppression> load_suppressions(const std::string& path, bool by_default) {
  std::string body = read_file(path);
  std::vector<Suppression> out;
  std::size_t pos = 0;
  int number = 0;
  while (pos < body.size()) {
    std::size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    std::string line = body.substr(pos, eol - pos);
    pos = eol + 1;
    ++number;
    std::string content = strip(line.substr(0, line.find('#')));
    if (content.empty()) continue;
    std::vector<std::string> parts;
    std::size_t i = 0;
    while (i < content.size()) {
      std::size_t j = content.find_first_of(" \t\r\f\v", i);
      if (j == std::string::npos) j = content.size();
      if (j > i) parts.push_back(content.substr(i, j - i));
      i = j + 1;
    }
    std::string where = path + ":" + std::to_string(number);
    if (parts.size() != 2)
      throw ReportError(where + ": expected 'RULE_GLOB KIND:GLOB' (KIND: fun, lib, src, at or keyval), got '" + content + "'");
    const std::string& rule = parts[0];
    const std::string& frame = parts[1];
    auto colon = frame.find(':');
    std::string kind = frame.substr(0, colon);
    std::string pattern = colon == std::string::npos ? "" : frame.substr(colon + 1);
    if (colon == std::string::npos ||
        (kind != "fun" && kind != "lib" && kind != "src" && kind != "at" && kind != "keyval") || pattern.empty())
      throw ReportError(where + ": frame pattern must be fun:GLOB, lib:GLOB, src:GLOB, at:GLOB or keyval:GLOB, got '" +
                        frame + "'");
    if (!rule_chars(rule))
      throw ReportError(where + ": '" + rule + "' is not a rule id or glob (e.g. keyval.leak, deprecated.*)");
    out.push_back({rule, kind, pattern, where, by_default});
  }
  return out;
}

std::vector<Suppression> default_suppressions() {
  std::string path = data_dir() + "/default.supp";
  if (!exists(path)) return {};
  return load_suppressions(path, true);
}

void suppress(Json& report, const std::vector<Suppression>& suppressions) {
  if (suppressions.empty()) return;
  std::unordered_map<std::int64_t, const Json*> stacks;
  if (const Json* st = member(report, "stacks"); st && st->is_array())
    for (const Json& s : *st)
      if (const Json* id = member(s, "id"); is_int(id)) {
        const Json* frames = member(s, "frames");
        if (frames && frames->is_array()) stacks.emplace(id->get<std::int64_t>(), frames);
      }
  auto add_stack = [&stacks](std::vector<const Json*>& frames, const Json& d) {
    const Json* id = member(d, "stack");
    if (!is_int(id)) return;
    auto it = stacks.find(id->get<std::int64_t>());
    if (it == stacks.end()) return;
    for (const Json& fr : *it->second)
      if (fr.is_object()) frames.push_back(&fr);
  };
  static const Json kEmpty = Json::object();
  Json kept = Json::array();
  Json suppressed = Json::array();
  if (const Json* s = member(report, "suppressed"); s && s->is_array()) suppressed = *s;
  std::int64_t totals[3] = {0, 0, 0};
  const char* const severities[] = {"error", "warning", "info"};
  Json findings = Json::array();
  if (auto f = report.find("findings"); f != report.end() && f->is_array()) findings = std::move(*f);
  for (Json& f : findings) {
    std::vector<const Json*> frames;
    const Json* site = member(f, "site");
    frames.push_back(site && site->is_object() ? site : &kEmpty);
    add_stack(frames, f);
    if (const Json* prov = member(f, "provenance"); prov && prov->is_array())
      for (const Json& p : *prov) add_stack(frames, p);
    const Suppression* hit = nullptr;
    for (const auto& s : suppressions)
      if (matches(s, f, frames)) {
        hit = &s;
        break;
      }
    std::int64_t count = integer(f, "count", 1);
    if (hit == nullptr) {
      std::string severity = text(f, "severity");
      for (int i = 0; i < 3; ++i)
        if (severity == severities[i]) totals[i] = add_sat(totals[i], count);
      kept.push_back(std::move(f));
      continue;
    }
    // The whole finding, with the suppression that matched it: a merged report merges again
    // (merge.hpp), and its suppressions are applied anew then.
    Json entry = {{"rule", text(f, "rule")}, {"severity", member(f, "severity") ? f["severity"] : Json()},
                  {"message", text(f, "message")}, {"count", member(f, "count") ? f["count"] : Json(1)},
                  {"ranks", member(f, "ranks") ? f["ranks"] : Json::array()}, {"suppression", hit->origin}};
    for (auto& [k, v] : f.items())
      if (!entry.contains(k)) entry[k] = std::move(v);
    if (hit->by_default) entry["default"] = true;
    suppressed.push_back(std::move(entry));
  }
  std::int64_t total_suppressed = 0;
  for (const Json& s : suppressed) total_suppressed = add_sat(total_suppressed, integer(s, "count", 1));
  report["findings"] = std::move(kept);
  report["suppressed"] = std::move(suppressed);
  report["summary"] = {{"error", totals[0]}, {"warning", totals[1]}, {"info", totals[2]},
                       {"suppressed", total_suppressed}};
}

}  // namespace attrcheck::reports
