// The names the in-process pass (symbolize.hpp) found for the report's frames, as the report
// writer reads them: an immutable table published to the findings store, looked up without
// allocating or locking (render.cpp renders from it, possibly in a signal handler).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace attrcheck {

// What the in-process pass found for one looked-up address (a return address minus one, or a
// callback's entry address as is). Empty strings / 0: nothing found.
struct SymbolEntry {
  std::uintptr_t pc = 0;
  const char* function = "";
  const char* file = "";
  long line = 0;
};

// Immutable once published; find() allocates nothing and takes no lock (usable in signal handlers).
class SymbolTable {
 public:
  const SymbolEntry* find(std::uintptr_t pc) const noexcept;

  // Building (normal path only).
  void add(std::uintptr_t pc, const std::string& function, const std::string& file, long line);
  void seal();  // sorts; call once, before publishing
  std::size_t size() const noexcept { return entries_.size(); }

 private:
  const char* keep(const std::string& s);
  std::vector<SymbolEntry> entries_;
  std::deque<std::string> strings_;  // stable addresses for the entries' strings
};

// The address a frame is looked up at: a return address names the call before it, so one byte
// back (at a function's very end, the address itself may be the next function's entry); a
// callback's entry address is its function as is.
inline std::uintptr_t lookup_pc(const void* address, bool entry) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  return entry || a == 0 ? a : a - 1;
}

}  // namespace attrcheck
