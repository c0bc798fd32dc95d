#pragma once
// A set of object handles with no allocation per element (the runtime's record of handles freed
// through the tool, objects.cpp): open addressing with linear probing, erasing by shifting the
// following entries back (no tombstones), doubling when three quarters full. A dup + free loop
// inserts and erases the same handle on every turn: std::unordered_set allocated and freed a node
// each time. Not thread-safe: the caller holds its lock. Header-only, no MPI
// (tests/handle_set_test.cpp).

#include <cstddef>
#include <cstdint>
#include <memory>

#include "attrcheck/engine.hpp"

namespace attrcheck::rt {

class HandleSet {
 public:
  bool contains(Handle h) const noexcept {
    if (h == 0) return has_zero_;
    if (count_ == 0) return false;
    for (std::size_t i = home(h);; i = (i + 1) & mask_) {
      if (slots_[i] == h) return true;
      if (slots_[i] == 0) return false;
    }
  }

  // False if it was there already.
  bool insert(Handle h) {
    if (h == 0) {
      const bool added = !has_zero_;
      has_zero_ = true;
      return added;
    }
    if (4 * (count_ + 1) > 3 * capacity()) grow();
    std::size_t i = home(h);
    for (; slots_[i] != 0; i = (i + 1) & mask_)
      if (slots_[i] == h) return false;
    slots_[i] = h;
    ++count_;
    return true;
  }

  // False if it was not there.
  bool erase(Handle h) noexcept {
    if (h == 0) {
      const bool had = has_zero_;
      has_zero_ = false;
      return had;
    }
    if (count_ == 0) return false;
    std::size_t i = home(h);
    for (; slots_[i] != h; i = (i + 1) & mask_)
      if (slots_[i] == 0) return false;
    // Backward shift: each later entry of the run whose home is not in (i, j] moves into the hole.
    for (std::size_t j = (i + 1) & mask_; slots_[j] != 0; j = (j + 1) & mask_) {
      const std::size_t k = home(slots_[j]);
      if (((j - k) & mask_) >= ((j - i) & mask_)) {  // k is at or before the hole: move j there
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = 0;
    --count_;
    return true;
  }

  std::size_t size() const noexcept { return count_ + (has_zero_ ? 1 : 0); }

  void clear() noexcept {
    for (std::size_t i = 0; i < capacity(); ++i) slots_[i] = 0;
    count_ = 0;
    has_zero_ = false;
  }

 private:
  std::size_t capacity() const noexcept { return slots_ ? mask_ + 1 : 0; }
  std::size_t home(Handle h) const noexcept {
    return static_cast<std::size_t>((h * 0x9E3779B97F4A7C15ULL) >> shift_) & mask_;
  }
  void grow() {
    const std::size_t old_capacity = capacity();
    std::unique_ptr<Handle[]> old = std::move(slots_);
    const std::size_t capacity = old_capacity ? 2 * old_capacity : 16;
    slots_.reset(new Handle[capacity]());
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    count_ = 0;
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i] != 0) insert(old[i]);
  }

  std::unique_ptr<Handle[]> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t count_ = 0;  // non-zero handles
  bool has_zero_ = false;
};

}  // namespace attrcheck::rt
