// Which module an address is in, on the signal path. dladdr may take the dynamic loader's lock
// (and allocate), which a fatal-signal handler must not: there the process's own mappings are read
// from /proc/self/maps (attrcheck/proc_maps.hpp: async-signal-safe, no allocation).
#pragma once

#include <cstdint>

namespace attrcheck {

// For each addresses[i] in a mapping of a file, calls found(context, i, path, offset), where
// `offset` is the address minus the start of the file's first mapping (what dladdr calls its
// base: the same in every process despite ASLR). Addresses in no file mapping are skipped.
// Async-signal-safe; uses ~13 KiB of stack.
void modules_from_maps(const void* const* addresses, int n,
                       void (*found)(void* context, int i, const char* path, std::uint64_t offset),
                       void* context) noexcept;

}  // namespace attrcheck
