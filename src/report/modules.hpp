// Which frames are not the user's: attrcheck's own module, and the MPI library's modules,
// recognised by what they define (modules.cpp).
#pragma once

#include <dlfcn.h>

namespace attrcheck {

// Our own module (libattrcheck.so, or the test executable): its frames are never the user's.
const void* own_base() noexcept;

// Whether a frame in the module dladdr found is attrcheck's or the MPI library's (trimmed from the
// innermost end of a stack).
bool is_tool_frame(const Dl_info& dl) noexcept;

}  // namespace attrcheck
