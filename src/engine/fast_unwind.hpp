// The fast stack walk behind capture_stack (x86_64 Linux; elsewhere it always defers to the full
// unwinder). Internal to the engine.
#pragma once

#include <cstdint>

#if defined(__x86_64__) && defined(__linux__)
#define ATTRCHECK_FAST_UNWIND 1
#else
#define ATTRCHECK_FAST_UNWIND 0
#endif

namespace attrcheck::detail {

// Walks the calling thread's stack from a frame that keeps a frame pointer: `frame` is that
// frame's rbp (__builtin_frame_address(0)), so its return address is at frame + 8 and its caller's
// rbp at frame. Stores the return addresses from there outwards, the first `skip` of them dropped,
// at most `max_depth`. Returns how many it stored, or -1 when this stack needs the full unwinder
// (a frame without call frame information, a CFA rule beyond the common subset, a stack it has
// no bounds for): the caller then unwinds the whole stack with it.
int fast_backtrace(const void* frame, void** out, int max_depth, int skip) noexcept;

// Bumped after every dlclose (src/engine/fast_unwind.cpp interposes it): a thread's cached frame
// rules are dropped when it changed, so code loaded later at the same address is read anew.
std::uint64_t modules_generation() noexcept;

}  // namespace attrcheck::detail
