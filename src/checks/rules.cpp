#include "checks/rules.hpp"

#include <cstring>

namespace attrcheck {

namespace {
constexpr RuleInfo kRules[] = {
#define RULE(Enum, id, severity, message, hint) {id, Severity::severity, message, hint},
#include "checks/rules.def"
#undef RULE
};
static_assert(sizeof kRules / sizeof kRules[0] == kRuleCount, "one row per rule");
}  // namespace

const RuleInfo& rule_info(Rule rule) noexcept {
  const int i = static_cast<int>(rule);
  return kRules[i >= 0 && i < kRuleCount ? i : 0];
}

const char* to_string(Severity severity) noexcept {
  switch (severity) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Info: return "info";
  }
  return "?";
}

bool parse_severity(const char* text, int* threshold) noexcept {
  if (!text) return false;
  static const char* const names[] = {"error", "warning", "info"};
  for (int i = 0; i < 3; ++i)
    if (std::strcmp(text, names[i]) == 0) return *threshold = i, true;
  if (std::strcmp(text, "never") == 0) return *threshold = -1, true;
  return false;
}

}  // namespace attrcheck
