// Shadow mode's replay: the callbacks the library runs during one forwarded call, collected by
// the trampolines (as Observations, or logged apart for a dup or free), from which the engine's
// mirror of that call is answered (the engine never runs user code twice). Not a public header.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "attrcheck/engine.hpp"
#include "runtime/process/abi.hpp"
#include "runtime/callbacks/run_list.hpp"
#include "runtime/process/call.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// A callback the library (shadow) or the engine (emulate) ran, as the trampoline saw it.
struct Observation {
  bool copy;
  ObjectKind kind;
  Handle object;
  int engine_id;
  int rc;  // (beside engine_id: the quick ways test both in one compare, ran_as_expected)
  std::uint64_t value_in;
  int flag;
  std::uint64_t value_out;
  bool used;
  Fint fortran_object;  // a Fortran callback's handle as the library passed it (0 if none:
                            // aggregate initialisation zeroes what it is not given)
};

static_assert(offsetof(Observation, rc) == offsetof(Observation, engine_id) + sizeof(int), "read as one word");

// Whether a delete callback the library ran (`o`) is the one the model requires of the attribute
// (h, engine_key) holding `value`: on that object, for that keyval, with that value, successfully.
// (engine_id and rc in one 64-bit compare with {engine_key, MPI_SUCCESS}: little-endian x86_64 /
// aarch64, where the first int is the low half.)
inline bool ran_as_expected(const Observation& o, Handle h, int engine_key, std::uint64_t value) noexcept {
  static_assert(MPI_SUCCESS == 0, "the high half of the expected word");
  std::uint64_t id_rc;
  std::memcpy(&id_rc, &o.engine_id, sizeof id_rc);
  return !o.copy && id_rc == static_cast<std::uint32_t>(engine_key) && o.object == h && o.value_in == value;
}

// A list that keeps its first N elements inline: the usual forwarded call sees a callback or
// two, and a heap allocation per set would cost more than the rest of the bookkeeping.
template <typename T, std::size_t N>
class InlineList {
  static_assert(std::is_trivially_copyable_v<T>, "elements are copied as bytes");
  // The inline elements are left uninitialised: a member initialiser in T would make every
  // forwarded call (each builds a Replay) initialise all N of them.
  static_assert(std::is_trivially_default_constructible_v<T>, "inline storage must cost nothing to construct");

 public:
  InlineList() noexcept {}
  ~InlineList() {
    if (size_ > N) delete[] heap_;
  }
  InlineList(const InlineList&) = delete;
  InlineList& operator=(const InlineList&) = delete;
  // The new last element (uninitialised).
  T& emplace_back() {
    if (__builtin_expect(size_ < N, 1)) return inline_[size_++];
    return spill();
  }
  void push_back(const T& v) { emplace_back() = v; }
  // Empties the list, the heap block of a spill freed (as a new list).
  void clear() noexcept {
    if (size_ > N) delete[] heap_;
    size_ = 0;
  }
  std::size_t size() const noexcept { return size_; }
  T* begin() noexcept { return size_ <= N ? inline_ : heap_; }
  T* end() noexcept { return begin() + size_; }
  const T* begin() const noexcept { return size_ <= N ? inline_ : heap_; }
  const T* end() const noexcept { return begin() + size_; }

 private:
  // Past N, every element lives on the heap (doubling). The first spill makes room for
  // kFirstSpill: a call that runs more callbacks than N usually runs one per attribute of an
  // object (a dup or free), and doubling from N reallocated and copied three times on the way to
  // 64.
  static constexpr std::size_t kFirstSpill = N < 64 ? 64 : 2 * N;
  T& spill() {
    if (size_ == N || size_ == capacity_) {
      const std::size_t capacity = size_ == N ? kFirstSpill : size_ * 2;
      T* bigger = new T[capacity];
      std::memcpy(static_cast<void*>(bigger), size_ == N ? inline_ : heap_, size_ * sizeof(T));
      if (size_ > N) delete[] heap_;
      heap_ = bigger;
      capacity_ = capacity;
    }
    return heap_[size_++];
  }

  std::size_t size_ = 0;
  // heap_ and capacity_ are set by the first spill and read only past N (every forwarded call
  // builds a list: two stores fewer).
  std::size_t capacity_;
  T* heap_;
  T inline_[N];
};

// Shadow dup / free: the library's runs of the C callbacks of the object being duplicated (copy
// callbacks) or freed (delete callbacks), logged by the trampolines directly in the terms
// Engine::dup_object_ran / free_object_ran take, instead of as Observations converted afterwards
// (the conversions, the Observations' growth and their heap block cost more than the logging).
// One per thread, reused (its lists keep their capacity); a dup or free run from inside a
// callback of another finds it busy and goes without (object_hooks.cpp).
struct RunLog {
  RunList<RanCopy> copies;
  RunList<RanDelete> deletes;
  // No object: no MPI library's handle is all ones.
  static constexpr Handle kNone = ~Handle{0};
  // The object whose copy callbacks (a dup) or whose delete callbacks (a free) are logged, the
  // other kNone: a trampoline tests its own in one compare (rather than a copy-or-delete flag and
  // the object).
  Handle copies_of = kNone;
  Handle deletes_of = kNone;
  ObjectKind kind = ObjectKind::Comm;
  bool odd_flag = false;  // a logged copy callback set *flag to neither 0 nor 1
  bool busy = false;
};

// Collects the callbacks the library runs during one forwarded call, then answers the engine's
// mirror of that call from them (shadow mode): the engine never runs user code twice.
// (Every forwarded call builds one: the fields it initialises are together, the two flags in one
// store, and ordered_object is left alone until has_ordered_object says it is there.)
struct Replay {
  const Call* call = nullptr;
  Replay* outer = nullptr;
  RunLog* log = nullptr;       // runs for one object logged apart from `seen` (dup / free)
  std::size_t used_below = 0;  // seen[0 .. used_below) are all used (replay.cpp)
  bool lenient = false;        // missing / extra callbacks are expected (no divergence)
  bool has_ordered_object = false;
  Handle ordered_object;       // delete callbacks on this object must come in the engine's order
  InlineList<Observation, 8> seen;
};

class ReplayScope {
 public:
  ReplayScope(const Call& call, bool lenient) noexcept {
    replay_.call = &call;
    replay_.lenient = lenient;
    replay_.outer = t_state.ctx.replay;
    t_state.ctx.replay = &replay_;
  }
  ~ReplayScope() { t_state.ctx.replay = replay_.outer; }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;
  Replay& replay() noexcept { return replay_; }
  void order_deletes_on(Handle h) noexcept { replay_.ordered_object = h; replay_.has_ordered_object = true; }
  // Reports callbacks the library ran that the engine did not ask for.
  void finish();
  // Moves the runs logged apart (Replay::log) into `seen`, for the replay one by one.
  void unlog();
  // Stops collecting, with nothing to report: the engine has accounted for every callback seen.
  void dismiss() noexcept { t_state.ctx.replay = replay_.outer; }

 private:
  Replay replay_;
};

// The engine's copy and delete callbacks in shadow mode, answered from the runs `r` collected
// (replay.cpp): a run the standard requires and the library did not make is a divergence.
int replay_copy(Replay& r, const CopyCall& c, std::uint64_t* out, int* flag);
int replay_delete(Replay& r, const DeleteCall& c);

}  // namespace attrcheck::rt
