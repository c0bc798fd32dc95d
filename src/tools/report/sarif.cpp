#include "tools/report/outputs.hpp"

#include "merge/load.hpp"

#include <map>

namespace attrcheck::reports {

namespace {

const char* level(const std::string& severity) {
  if (severity == "error") return "error";
  if (severity == "info") return "note";
  return "warning";
}

Json value_or(const Json& obj, const char* key, Json fallback) {
  const Json* v = member(obj, key);
  return v ? *v : fallback;
}

std::int64_t start_line(const Json& frame) { return std::max<std::int64_t>(1, integer(frame, "line", 1)); }

Json sarif_location(const Json& frame) {
  if (truthy(frame, "file"))
    return {{"physicalLocation", {{"artifactLocation", {{"uri", value_or(frame, "file", "")}}},
                                  {"region", {{"startLine", start_line(frame)}}}}},
            {"logicalLocations", Json::array({{{"fullyQualifiedName", value_or(frame, "function", "")},
                                               {"kind", "function"}}})}};
  return {{"logicalLocations", Json::array({{{"fullyQualifiedName", frame_text(frame)}, {"kind", "function"}}})}};
}

}  // namespace

std::string sarif(const Json& report, const std::string& tool_version) {
  std::map<std::string, std::size_t> index;
  Json driver_rules = Json::array();
  for (const Rule& r : rules()) {
    index.emplace(r.id, index.size());
    std::string anchor;
    for (const char* c = r.id; *c; ++c)
      if (*c != '.') anchor += *c;
    driver_rules.push_back({{"id", r.id}, {"shortDescription", {{"text", r.message}}},
                            {"fullDescription", {{"text", r.hint}}},
                            {"defaultConfiguration", {{"level", level(r.severity)}}},
                            {"helpUri", "https://attrcheck.invalid/docs/rules.md#" + anchor}});
  }
  Json results = Json::array();
  static const Json kEmpty = Json::object();
  const Json* findings = member(report, "findings");
  for (const Json& f : findings && findings->is_array() ? *findings : Json::array()) {
    const Json* site_p = member(f, "site");
    const Json& site = site_p && site_p->is_object() ? *site_p : kEmpty;
    std::string message = text(f, "message") + ". " + text(f, "hint");
    while (!message.empty() && (message.back() == ' ' || message.back() == '\n')) message.pop_back();
    Json result = {{"ruleId", value_or(f, "rule", nullptr)},
                   {"level", level(text(f, "severity", "warning"))},
                   {"message", {{"text", message}}},
                   {"occurrenceCount", value_or(f, "count", 1)},
                   {"properties", {{"ranks", value_or(f, "ranks", Json::array())}, {"call", value_or(f, "call", "")},
                                   {"module", value_or(site, "module", "")}, {"offset", value_or(site, "offset", "")}}}};
    if (truthy(f, "spawned_ranks")) result["properties"]["spawned_ranks"] = f["spawned_ranks"];
    if (auto it = index.find(text(f, "rule")); it != index.end()) result["ruleIndex"] = it->second;
    const Json& frames = stack_frames(report, member(f, "stack"));
    if (!frames.empty()) {
      Json sf = Json::array();
      for (const Json& fr : frames) sf.push_back({{"location", sarif_location(fr)}, {"module", value_or(fr, "module", "")}});
      result["stacks"] = Json::array({{{"message", {{"text", "where"}}}, {"frames", sf}}});
    }
    Json related = Json::array();
    if (const Json* prov = member(f, "provenance"); prov && prov->is_array()) {
      for (const Json& p : *prov) {
        const Json& pf = stack_frames(report, member(p, "stack"));
        if (pf.empty()) continue;
        Json loc = sarif_location(first_frame(pf));
        loc["id"] = related.size();
        loc["message"] = {{"text", value_or(p, "what", "")}};
        related.push_back(std::move(loc));
      }
    }
    if (!related.empty()) result["relatedLocations"] = related;
    if (const Json* py = user_python_site(report, f)) {  // made from Python: the user's .py line
      result["locations"] = Json::array({sarif_location(*py)});
    } else if (truthy(site, "file")) {
      result["locations"] = Json::array({{{"physicalLocation", {{"artifactLocation", {{"uri", site["file"]}}},
                                                                {"region", {{"startLine", start_line(site)}}}}},
                                          {"logicalLocations", Json::array({{{"fullyQualifiedName",
                                                                              value_or(site, "function", "")},
                                                                             {"kind", "function"}}})}}});
    } else if (truthy(site, "symbol") || truthy(site, "module")) {
      std::string name = truthy(site, "symbol") ? text(site, "symbol")
                                                : basename(text(site, "module")) + "+" + text(site, "offset", "None");
      result["locations"] = Json::array({{{"logicalLocations",
                                           Json::array({{{"fullyQualifiedName", name}, {"kind", "function"}}})}}});
    }
    results.push_back(std::move(result));
  }
  Json out = {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
              {"version", "2.1.0"},
              {"runs", Json::array({{{"tool", {{"driver", {{"name", "attrcheck"},
                                                           {"version", tool_version},
                                                           {"informationUri", "https://attrcheck.invalid/docs/rules.md"},
                                                           {"rules", driver_rules}}}}},
                                     {"results", results}}})}};
  return dump(out, 1) + "\n";
}

}  // namespace attrcheck::reports
