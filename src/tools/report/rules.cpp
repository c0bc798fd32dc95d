#include "tools/report/outputs.hpp"

namespace attrcheck::reports {

namespace {
constexpr const char* Error = "error";
constexpr const char* Warning = "warning";
constexpr const char* Info = "info";
}  // namespace

const std::vector<Rule>& rules() {
  static const std::vector<Rule> table = {
#define RULE(name, id, severity, message, hint) {id, severity, message, hint},
#include "checks/rules.def"
#undef RULE
  };
  return table;
}

}  // namespace attrcheck::reports
