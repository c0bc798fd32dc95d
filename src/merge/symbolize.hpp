// Offline symbolization: module + module-relative offset -> function, file, line, with binutils'
// addr2line (one run per module) after the run, so that it also works for the report of a
// crashed rank. Frames the runtime already symbolized in the process ("symbolized": true, or a
// "function") are left as they are.
#pragma once

#include "merge/json.hpp"

#include <optional>
#include <string>
#include <vector>

namespace attrcheck::reports {

// Adds function, file and line to every site and stack frame whose module has them; marks the
// report "symbolized" (a second call does nothing).
void symbolize(Json& report);

// Runs argv (no shell), returns its standard output, or nothing when it could not run.
std::optional<std::string> capture(const std::vector<std::string>& argv);

}  // namespace attrcheck::reports
