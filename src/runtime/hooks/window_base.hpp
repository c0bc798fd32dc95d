// The base address each window's constructor returned, and the answer to MPI_WIN_BASE: the
// standard's (MPI-4.0 12.2.6: the window's base address, the baseptr MPI_Win_allocate returned).
// Where the library's own answer differs, shadow mode says so (a library.divergence note where the
// profile lists it: win-allocate-base-attribute-differs) and emulate mode answers the base.
#pragma once

#include "runtime/hooks/hook_common.hpp"

namespace attrcheck::rt {

// The window is freed: its base is forgotten.
void forget_window_base(Handle win) noexcept;
// After the library answered a C get of MPI_WIN_BASE on `win` (rc MPI_SUCCESS): checks its
// answer against the base the constructor returned, if known, and in emulate mode answers that.
void check_window_base(const Call& call, Handle win, void* value_out, const int* flag) noexcept;

}  // namespace attrcheck::rt
