// RunList: the growing array a shadow dup or free logs the library's callback runs into
// (replay.hpp: RunLog). Header-only, no MPI (tests/run_list_test.cpp).
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace attrcheck::rt {

// A growing array that keeps its capacity when emptied (the thread's RunLog is reused), appended
// to in place: std::vector's push_back built each run on the stack and copied it over, and its
// emplace_back was called out of line.
template <typename T>
class RunList {
  static_assert(std::is_trivially_copyable_v<T>, "elements are copied as bytes");

 public:
  RunList() noexcept = default;
  ~RunList() { delete[] data_; }
  RunList(const RunList&) = delete;
  RunList& operator=(const RunList&) = delete;
  // The new last element (uninitialised).
  T& append() {
    if (__builtin_expect(size_ == capacity_, 0)) grow();
    return data_[size_++];
  }
  void push_back(const T& v) { append() = v; }
  // Back to the first n elements (n <= size()).
  void shrink_to(std::size_t n) noexcept { size_ = n; }
  void clear() noexcept { size_ = 0; }
  std::size_t size() const noexcept { return size_; }
  T* data() noexcept { return data_; }
  T* begin() noexcept { return data_; }
  T* end() noexcept { return data_ + size_; }
  const T* begin() const noexcept { return data_; }
  const T* end() const noexcept { return data_ + size_; }

 private:
  __attribute__((noinline)) void grow() {
    const std::size_t capacity = capacity_ ? 2 * capacity_ : 64;  // (a dup's runs: one an attribute)
    T* bigger = new T[capacity];
    if (size_) std::memcpy(static_cast<void*>(bigger), data_, size_ * sizeof(T));
    delete[] data_;
    data_ = bigger;
    capacity_ = capacity;
  }

  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace attrcheck::rt
