// Provenance: raw call stacks, captured cheaply and stored once.
//
// The engine records an `Origin` (a StackDepot id) for where a keyval was created and freed,
// an attribute set, and an object created. Capturing stores raw return addresses only;
// symbolizing them is left to whoever prints a report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "attrcheck/engine.hpp"

namespace attrcheck {

inline constexpr int kMaxStackDepth = 64;

// Captures up to `max_depth` return addresses of the calling thread, skipping `skip` innermost
// frames (this function itself is never included). Returns the number stored.
int capture_stack(void** frames, int max_depth, int skip) noexcept;
// Captures the stack from a frame further out, of a function that keeps a frame pointer and is
// still running on this thread (`frame`: its __builtin_frame_address(0); `caller`: its return
// address, the first one stored): the frames inside it are not walked. Without a fast walk of
// that stack, the full unwinder's stack from `caller` on (all of it if `caller` is not on it).
int capture_stack_from(const void* frame, const void* caller, void** frames, int max_depth) noexcept;
// Prepares both unwinders so that a later capture on this thread never allocates: the fast walk's
// stack bounds for the calling thread (pthread_getattr_np allocates for the main thread), and the
// full unwinder it falls back to (dlopen, and backtrace()'s first call loads libgcc). Call it
// before a capture can happen in a signal handler; not at load time, since every process the
// library is preloaded into (mpirun, shells) would pay for it.
void warm_up_stack_capture() noexcept;

// Stores each distinct stack once and names it by a small id (0 = "no stack").
// Thread-safe. Ids stay valid for the depot's lifetime. Each thread remembers the last few stacks
// it interned (a create and a free from the same code repeat theirs), so interning one of those
// again takes no lock.
class StackDepot {
 public:
  StackDepot();
  // Returns the id of this stack, storing it if new. 0 for an empty stack.
  Origin intern(void* const* frames, int depth);
  // Captures the caller's stack (skipping `skip` frames above the caller) and interns it.
  Origin capture(int max_depth, int skip = 0);
  // Captures the stack from `frame` outwards (capture_stack_from) and interns it. Each thread
  // remembers its last few such walks and the stack words they read: a capture from the same
  // frame whose words all read the same again is known without walking (provenance.cpp).
  Origin capture_from(const void* frame, const void* caller, int max_depth);
  // The frames of an id (empty for 0 or an unknown id).
  std::vector<void*> frames(Origin id) const;
  std::size_t size() const;  // distinct stacks stored

 private:
  Origin intern_locked(void* const* frames, int depth, std::uint64_t hash);
  Origin capture_remembered(const void* frame, const void* caller, int max_depth);
  // capture_from's walk, remembered in `memo_set` (provenance.cpp's, nullptr: not remembered).
  Origin capture_walked(const void* frame, const void* caller, int max_depth, std::uint64_t modules, void* memo_set);
  struct Key {
    std::uint32_t offset;
    std::uint32_t depth;
  };
  const std::uint64_t serial_;  // this depot, for the per-thread memory of recent stacks
  mutable std::mutex mu_;
  std::vector<void*> storage_;                             // all frames, back to back
  std::vector<Key> stacks_;                                // id - 1 -> its frames
  std::unordered_multimap<std::uint64_t, Origin> by_hash_;
};

}  // namespace attrcheck
