// The fast stack walk behind capture_stack (x86_64 Linux; elsewhere it always defers to the full
// unwinder). Internal to the engine.
#pragma once

#include <atomic>
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

// The stack words a walk read, in order: its result is a function of them, of where it started
// and of the frame rules of the return addresses it met (which only a module change alters), so a
// walk from the same frame, with the same max_depth, on the same thread and with the same modules,
// whose words all read the same again, stores the very same frames (StackDepot::capture_from
// remembers walks so). `reads` counts every read; past kWalkLogReads the rest is not logged.
inline constexpr int kWalkLogReads = 40;
struct WalkLog {
  struct Read {
    std::uintptr_t addr, value;
  };
  int reads;
  Read read[kWalkLogReads];  // (address and value side by side: a check reads them together)
};
// fast_backtrace without a skip, logging its reads in *log.
int fast_backtrace_logged(const void* frame, void** out, int max_depth, WalkLog* log) noexcept;
// Whether every word of a complete log (reads <= kWalkLogReads) of a walk this thread made from a
// frame it is still running in, or one further out, still holds the value read.
bool stack_unchanged(const WalkLog& log) noexcept;

// Bumped after every dlclose (src/engine/fast_unwind.cpp interposes it): a thread's cached frame
// rules are dropped when it changed, so code loaded later at the same address is read anew.
// (Inline: every remembered capture reads it.)
extern std::atomic<std::uint64_t> g_modules_generation;
inline std::uint64_t modules_generation() noexcept { return g_modules_generation.load(std::memory_order_acquire); }

}  // namespace attrcheck::detail
