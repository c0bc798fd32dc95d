// In-process symbolization of a rank's report at its normal end (MPI_Finalize): the frames the
// findings refer to (sites, stacks, provenance stacks) get function, file and line from
// Boost.Stacktrace's libbacktrace backend, which reads the modules' DWARF in this process.
//
// Only what the report refers to is read: libbacktrace is shown only the modules those frames are
// in (a clean run reads nothing), and only modules it can read quickly (plain DWARF within a
// budget). A module whose DWARF is compressed, such as one with a Debian /usr/lib/debug file
// (libc6-dbg's libc), would cost ~1 s to read: its frames are named from its symbol tables (the
// debug file's, with the static functions) without file and line. What neither names, DWARF over
// the budget, and reports of processes that never reached MPI_Finalize are left to the offline
// pass of attrcheck-report.
//
// The result is a table published to the store; the report writer (async-signal-safe) only reads
// it. A frame whose address is in the table was attempted: the report marks it "symbolized", so
// the offline pass leaves it alone even when nothing was found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "report/symbol_table.hpp"

namespace attrcheck {

class FindingStore;

// What the in-process pass may read: a module's DWARF (in it, or in its separate debug file) is
// read only if it is uncompressed and the modules read so far stay within `dwarf_budget` bytes
// (libbacktrace reads plain DWARF at roughly 1-2 ms per MiB here; compressed, ~40 times slower).
struct SymbolizeLimits {
  std::uint64_t dwarf_budget = 48ull << 20;
  std::uint64_t symtab_budget = 16ull << 20;  // symbol tables (~700k symbols): sorted when read
};

// Symbolizes every frame the store's committed findings refer to and publishes the table in the
// store (replacing none: at most once per process; later calls do nothing). Normal path only
// (allocates, opens files); never throws. Returns the number of addresses attempted.
std::size_t symbolize_findings(FindingStore& store, const SymbolizeLimits& limits = {}) noexcept;

// A frame of a report by its module and the offset in it (a job's gathered report: its frames
// come from every rank, whose addresses differ; their modules and offsets do not).
struct ModuleFrame {
  std::string module;
  std::uint64_t offset = 0;
  bool entry = false;  // a function's entry (looked up as is), not a return address
};
// Names frames as symbolize_findings() does, in this process, where their modules are loaded
// here too (the same program and libraries as the other ranks', mostly), with the same reading
// and limits: each frame given once. addresses[i]: where frames[i] is looked up here (0: not
// loaded here, left to the offline pass); the table is keyed by it. nullptr: nothing named.
std::unique_ptr<SymbolTable> symbolize_frames(const std::vector<ModuleFrame>& frames,
                                              std::vector<std::uintptr_t>* addresses,
                                              const SymbolizeLimits& limits = {}) noexcept;

// What the pass would read of the module at `path` (exposed for tests): whether its DWARF is
// there and readable in-process, and how many bytes of DWARF and of symbol table that is.
struct ModuleCost {
  bool elf = false;         // an ELF file we could read
  bool dwarf = false;       // it (or its separate debug file) has DWARF
  bool compressed = false;  // that DWARF is compressed (left to the offline pass)
  std::uint64_t dwarf_bytes = 0;
  std::uint64_t symtab_bytes = 0;
  std::string debug_file;  // the separate debug file the DWARF is in, if any
};
ModuleCost module_cost(const char* path) noexcept;

}  // namespace attrcheck
