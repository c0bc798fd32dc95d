// The symbol table the in-process pass builds and the report writer reads (see symbol_table.hpp).
#include "report/symbol_table.hpp"

#include <algorithm>

namespace attrcheck {

const char* SymbolTable::keep(const std::string& s) {
  if (s.empty()) return "";
  strings_.push_back(s);
  return strings_.back().c_str();
}

void SymbolTable::add(std::uintptr_t pc, const std::string& function, const std::string& file, long line) {
  SymbolEntry e;
  e.pc = pc;
  e.function = keep(function);
  e.file = keep(file);
  e.line = file.empty() ? 0 : line;
  entries_.push_back(e);
}

void SymbolTable::seal() {
  std::sort(entries_.begin(), entries_.end(), [](const SymbolEntry& a, const SymbolEntry& b) { return a.pc < b.pc; });
  entries_.erase(std::unique(entries_.begin(), entries_.end(),
                             [](const SymbolEntry& a, const SymbolEntry& b) { return a.pc == b.pc; }),
                 entries_.end());
}

const SymbolEntry* SymbolTable::find(std::uintptr_t pc) const noexcept {
  std::size_t lo = 0, hi = entries_.size();
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (entries_[mid].pc < pc) lo = mid + 1;
    else hi = mid;
  }
  return lo < entries_.size() && entries_[lo].pc == pc ? &entries_[lo] : nullptr;
}

}  // namespace attrcheck
