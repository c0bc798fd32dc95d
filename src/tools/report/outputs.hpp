// What a merged report becomes for people and for CI: the summary table (the launcher prints it
// too), the gate's selection, SARIF 2.1.0, JUnit XML, and the self-contained HTML page.
#pragma once

#include "merge/load.hpp"

#include <string>
#include <vector>

namespace attrcheck::reports {

// Findings whose severity is at or above threshold (error, warning, info; never: none).
std::vector<const Json*> at_or_above(const Json& findings, const std::string& threshold);
// Where a finding is, for people: function (file:line), else symbol, else module+offset.
std::string location(const Json& finding);
// Where a finding is, for people, in `report`: the first frame of its stack that is the user's
// Python code (app.py:12 in make_keyval), else location(finding).
std::string location(const Json& report, const Json& finding);
// A frame for people: a Python frame as file:line in function; else function (file:line), else
// function, else module+offset.
std::string frame_text(const Json& frame);
// The user's Python frames (is_python_frame, load.hpp): those not in mpi4py's package, the
// import machinery (<frozen ...>) or runpy.
bool is_user_python_frame(const Json& frame);
// The first of `frames` that is the user's Python code, or null.
const Json* user_python_frame(const Json& frames);
// The user's Python frame a finding was made at (its stack's, else its site's), or null. A finding
// at MPI_Finalize with neither (no Python code running: mpi4py finalizes from the interpreter's
// exit) is at its provenance's first such frame: where the leaked thing was made.
const Json* user_python_site(const Json& report, const Json& finding);
// What a stack is shown by: its first user's Python frame, else its first frame.
const Json& first_frame(const Json& frames);
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
