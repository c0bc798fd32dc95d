// The call counts (process/call_counts.hpp), by the path the generated wrappers include them:
// this header, hooks.hpp, fast_path.hpp and set_path.hpp are the runtime's face to the wrappers.
#pragma once

#include "runtime/process/call_counts.hpp"
