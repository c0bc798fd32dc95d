// A thread's deferred sets, as data: the records the thread-local block holds (t_state.pending)
// and the quick ways and pending.cpp change. Not a public header.
#pragma once

#include <atomic>
#include <cstdint>

#include "attrcheck/engine.hpp"
#include "runtime/fast/query_cache.hpp"

namespace attrcheck::rt {

// Deferred sets (shadow mode, below MPI_THREAD_MULTIPLE, C binding). A set whose query's cached
// answer is current, and for which the library ran exactly the callbacks the model requires (the
// old value's delete callback, with that value, successfully; or none), is checked in full then
// and there; only its application to the engine waits. The query's cache entry holds the new
// answer meanwhile (`pending`), so gets of it are answered and cross-checked as usual, and a
// further set of it replaces the pending one. Anything else that would read or change the engine
// first applies every pending set, in the order they were made (settle()): each hook on entry,
// an answer refresh, finalize.
struct PendingSet {
  QueryCache::Entry* entry = nullptr;
  std::uint64_t before = 0;  // the answer before the first deferred set (the value it replaced)
  std::uint32_t stamp = 0;   // when the last set of the query was made (they apply in this order)
  // In a program whose Python frames are read (FastState::python_sites): where the last set was
  // made, with its Python frames (by the time the set is applied they are gone); else 0.
  Origin origin = 0;
  const void* site = nullptr;  // where the last set was made (its call site)
  bool replaced = false;     // the first deferred set replaced a value with a user delete callback
  bool inserted = false;     // the first deferred set made the attribute (none was set before)
};
struct PendingSets {
  static constexpr int kMax = 128;
  int count = 0;
  std::uint32_t clock = 0;
  // Engine::version() right after this thread's last set mirrored on the spot. A set whose cached
  // answer is out of date reads it afresh to be deferred only while the version still reads
  // this, i.e. in a run of sets: a set between other changes (a set + delete pair, say) is
  // cheaper mirrored at once than read, deferred and applied.
  std::uint64_t mirrored_at = ~0ULL;
  // MPI_THREAD_MULTIPLE: another thread applied these sets (settle_elsewhere) without touching
  // the owner's cache entries, which the owner may be reading; the owner clears their marks
  // (under the gate) before it uses them again. Set before any engine change of that thread, so
  // an owner that finds its pending entry's answer out of date finds this set.
  std::atomic<bool> applied{false};
  PendingSet sets[kMax];
};

}  // namespace attrcheck::rt
