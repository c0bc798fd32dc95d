// What a merged report becomes for people and for CI: the summary table (the launcher prints it
// too), the gate's selection, SARIF 2.1.0, JUnit XML, and the self-contained HTML page.
#pragma once

#include "report/json.hpp"

#include <string>
#include <vector>

namespace attrcheck::reports {

// Findings whose severity is at or above threshold (error, warning, info; never: none).
std::vector<const Json*> at_or_above(const Json& findings, const std::string& threshold);
// Where a finding is, for people: function (file:line), else symbol, else module+offset.
std::string location(const Json& finding);
// A frame for people: function (file:line), else function, else module+offset.
std::string frame_text(const Json& frame);
// The frames of a stack id of report (an empty array if none).
const Json& stack_frames(const Json& report, const Json* stack_id);
// The human table: counts, ranks that did not finish, rule, severity, count, ranks, where.
std::string summary_text(const Json& report);

// Every rule attrcheck defines (compiled in from rules.def): id, severity, message, hint.
struct Rule {
  const char *id, *severity, *message, *hint;
};
const std::vector<Rule>& rules();

std::string sarif(const Json& report, const std::string& tool_version);
std::string junit(const Json& report);
std::string html(const Json& report);

}  // namespace attrcheck::reports
