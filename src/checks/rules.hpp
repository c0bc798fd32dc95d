// The rule vocabulary, expanded from rules.def (the one place rules are defined).
#pragma once

#include <cstdint>

namespace attrcheck {

enum class Severity : std::uint8_t { Error = 0, Warning = 1, Info = 2 };
const char* to_string(Severity severity) noexcept;
// "error" | "warning" | "info" | "never" -> threshold; false on anything else.
bool parse_severity(const char* text, int* threshold) noexcept;

enum class Rule : std::uint8_t {
#define RULE(Enum, id, severity, message, hint) Enum,
#include "checks/rules.def"
#undef RULE
  Count
};

struct RuleInfo {
  const char* id;
  Severity severity;
  const char* message;  // template: {call} {keyval} {object} {detail} {replacement}
  const char* hint;
};

const RuleInfo& rule_info(Rule rule) noexcept;
inline constexpr int kRuleCount = static_cast<int>(Rule::Count);

}  // namespace attrcheck
