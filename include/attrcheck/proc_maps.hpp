// The process's own memory mappings, read from /proc/self/maps in a way a signal handler may use:
// open/read/close into fixed buffers, no allocation, errno kept. The fast stack walk finds a
// thread's stack bounds with it (a thread's first walk may be in the fatal-signal handler), and
// the findings store the modules of a stack recorded there (dladdr is not async-signal-safe).
#pragma once

#include <cstdint>

namespace attrcheck {

struct Mapping {
  std::uintptr_t start = 0, end = 0;  // [start, end)
  std::uint64_t file_offset = 0;
  const char* path = "";  // valid during the visit only; "" for anonymous memory, "[stack]" & co
};

// Calls visit(context, mapping) for each mapping, in address order, until it returns false (a
// line longer than PATH_MAX + 256 characters is skipped). False if /proc/self/maps could not be
// opened. Uses ~8.5 KiB of stack.
bool for_each_mapping(bool (*visit)(void* context, const Mapping& m), void* context) noexcept;

// The same over a maps file already open (read from where it stands, not closed): its tests' way
// to give it lines split between reads and overlong ones.
bool for_each_mapping_in(int fd, bool (*visit)(void* context, const Mapping& m), void* context) noexcept;

}  // namespace attrcheck
