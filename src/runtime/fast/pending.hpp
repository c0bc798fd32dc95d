// Deferred sets (pending_sets.hpp): applied before anything reads or changes the engine
// (settle), recorded and cancelled by the quick ways, shared between threads by thread level, and
// the emulate cache's announced changes at MPI_THREAD_MULTIPLE (pending.cpp). Not a public header.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "attrcheck/engine.hpp"
#include "runtime/process/fast_state.hpp"
#include "runtime/fast/pending_sets.hpp"
#include "runtime/fast/query_cache.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// Applies this thread's pending sets.
void apply_pending() noexcept;
// From MPI_THREAD_SERIALIZED: applies the pending sets of another thread (pending_owner). At
// SERIALIZED the program's serialisation of its MPI calls orders them before this call (that
// thread is not in MPI now): the applying thread also updates that thread's query cache entries.
// At MULTIPLE this thread is a second one calling MPI: deferral ends for good, and the sets are
// applied under the gate, marking them `applied` for their owner. A thread that exits with sets
// pending hands them over first (pending.cpp), so they never point into freed storage.
void settle_elsewhere() noexcept;
// Another thread's sets are pending (then answers read from the engine, and cached answers, may
// be out of date): call settle_elsewhere.
inline bool pending_elsewhere() noexcept {
  return __builtin_expect(g_fast.pending_owner.any(), 0) &&
         g_fast.pending_owner.load(std::memory_order_relaxed) != &t_state.pending;
}
inline void settle() noexcept {
  if (__builtin_expect(t_state.pending.count != 0, 0)) apply_pending();
  else if (__builtin_expect(g_fast.pending_owner.any(), 0)) settle_elsewhere();
}
// How the owner's changes to its pending sets are shared with other threads, by thread level:
// kOwn below MPI_THREAD_SERIALIZED (no other thread calls); kSerialized: the thread that defers
// its first set takes pending_owner (claim_pending), and gives it back with its last one
// (release_pending); kGated (MPI_THREAD_MULTIPLE): the thread that initialised MPI owns the
// pending sets from then on (hold_pending_owner: only it defers sets, until a second thread
// calls and ends deferral), and changes them under g_pending_gate.
// (The callers pick it with record_pending_here / cancel_pending_here, below.)
// kGateHeld: kGated's, made by a thread that holds the gate already (finish_cache_change).
enum class Sharing : std::uint8_t { kOwn, kSerialized, kGated, kGateHeld };
// The first set a thread defers: at MPI_THREAD_SERIALIZED the thread takes pending_owner, unless
// another thread's sets are pending (false: then this set is mirrored on the spot, which applies
// them first). Registers the thread's exit hand-over (pending.cpp) the first time.
extern __thread bool t_exit_hooked;
bool hook_thread_exit() noexcept;  // false: it cannot be (no set of this thread is deferred)
// MPI_THREAD_MULTIPLE, at MPI's start on the thread that started it: that thread owns the pending
// sets while they are deferred, without pending_owner (pending.cpp: the thread whose first call
// ends deferral finds them all the same). False: it cannot (its exit hand-over cannot be
// registered): no set is to be deferred.
bool hold_pending_owner() noexcept;
template <Sharing kShare>
[[gnu::always_inline]] inline bool claim_pending() noexcept {
  if (kShare != Sharing::kSerialized) return true;  // (kGated: owned since MPI started)
  if (g_fast.pending_owner.any()) return false;
  if (__builtin_expect(!t_exit_hooked, 0) && !hook_thread_exit()) return false;
  g_fast.pending_owner.store(&t_state.pending, std::memory_order_relaxed);
  return true;
}
// The thread's last pending set went (applied, or cancelled by a delete): at
// MPI_THREAD_SERIALIZED the word is given back (at MULTIPLE it is not taken: the owner is known
// without it, and claiming and releasing it would cost every set + delete there).
// (always_inline, as lock_gate: gcc called both out of line from the cancelling delete.)
[[gnu::always_inline]] inline void release_pending() noexcept {
  g_fast.pending_owner.store(nullptr, std::memory_order_relaxed);
}
// MPI_THREAD_MULTIPLE: the owner's changes to its pending sets, another thread's settling of
// them and a thread's exit hand-over exclude each other through this spin lock (uncontended
// while one thread calls: an exchange and a store). Its state also says whether sets may still
// be deferred: the thread that ends deferral (settle_elsewhere) leaves it kGateClosed, so the
// owner's one exchange both takes the gate and finds deferral on (kGateOpen), where a test of
// defer_sets and of its sets' `applied` mark came after it.
// Whoever takes it (exchange kGateHeld) gives back the state it found (unlock_gate).
inline constexpr std::uint8_t kGateOpen = 0, kGateHeld = 1, kGateClosed = 2;
extern std::atomic<std::uint8_t> g_pending_gate;
// The gate was not open: waits while another thread holds it, then takes it; returns the state
// found (kGateOpen or kGateClosed).
std::uint8_t gate_not_open(std::uint8_t found) noexcept;
[[gnu::always_inline]] inline std::uint8_t lock_gate() noexcept {
  const std::uint8_t found = g_pending_gate.exchange(kGateHeld, std::memory_order_acquire);
  return __builtin_expect(found == kGateOpen, 1) ? kGateOpen : gate_not_open(found);
}
inline void unlock_gate(std::uint8_t found) noexcept { g_pending_gate.store(found, std::memory_order_release); }
// The owner's side: holds the gate at MPI_THREAD_MULTIPLE (no-op below); open(): sets may still
// be deferred (at MULTIPLE: the gate is not closed; then no other thread has applied this
// thread's sets either, since the thread that does also closes it, for good, under the gate).
template <Sharing kShare>
class OwnerGate {
 public:
  [[gnu::always_inline]] OwnerGate() noexcept : found_(kShare == Sharing::kGated ? lock_gate() : kGateOpen) {}
  [[gnu::always_inline]] ~OwnerGate() {
    if (kShare == Sharing::kGated) unlock_gate(found_);
  }
  [[gnu::always_inline]] bool open() const noexcept { return found_ == kGateOpen; }
  OwnerGate(const OwnerGate&) = delete;
  OwnerGate& operator=(const OwnerGate&) = delete;

 private:
  std::uint8_t found_;
};

// A deferred set's provenance in a program whose Python frames are read: its call site and
// Python frames, now (pending.cpp).
Origin pending_python_origin(const void* site) noexcept;
// q's pending set (just recorded) takes its Python frames (record_pending, out of line).
void keep_python_origin_of(QueryCache::Entry& q, const void* site) noexcept;  // (q.pending: its record)
// defer_set's record of the set in t_state.pending (kShare: the thread level's, above).
// False: not deferred. (A program whose Python frames are read shares its pending sets at any
// thread level, so that kOwn, what a program without Python below MPI_THREAD_SERIALIZED uses,
// needs no test of FastState::python_sites.)
template <Sharing kShare>
[[gnu::always_inline]] inline bool record_pending(QueryCache::Entry& q, std::uint64_t word, const void* site,
                                                  bool replaces) noexcept {
  OwnerGate<kShare> gate;
  if (!gate.open()) return false;
  PendingSets& p = t_state.pending;
  if (const std::uint8_t pending = q.pending) {
    PendingSet& ps = p.sets[pending - 1];
    ps.stamp = ++p.clock;
    ps.site = site;
  } else {
    if (p.count == PendingSets::kMax || (p.count == 0 && !claim_pending<kShare>())) return false;
    p.sets[p.count] = PendingSet{&q, q.word, ++p.clock, 0, site, replaces, q.flag == 0};
    q.pending = static_cast<std::uint8_t>(++p.count);
    QueryCache::drop_other_answers(q);
  }
  q.word = word;
  q.flag = 1;
  // (Once, at the end, under the gate still: what the test keeps live across the record is q.)
  if (kShare != Sharing::kOwn && __builtin_expect(g_fast.python_sites, 0)) keep_python_origin_of(q, site);
  return true;
}
// record_pending at the thread level's Sharing (one test below MPI_THREAD_SERIALIZED, two from it).
[[gnu::always_inline]] inline bool record_pending_here(QueryCache::Entry& q, std::uint64_t word, const void* site,
                                                       bool replaces) noexcept {
  if (!g_fast.share_pending) return record_pending<Sharing::kOwn>(q, word, site, replaces);
  if (g_fast.gate_pending) return record_pending<Sharing::kGated>(q, word, site, replaces);
  return record_pending<Sharing::kSerialized>(q, word, site, replaces);
}

// Drops q's pending set (record `pending` - 1), which a delete cancelled: the engine's answer is
// q's again (absent). False, with nothing done, if (MPI_THREAD_MULTIPLE) another thread applied
// it meanwhile. kShare: the thread level's (the gate, pending_owner; above).
template <Sharing kShare>
[[gnu::always_inline]] inline bool cancel_pending(QueryCache::Entry& q, std::uint8_t pending) noexcept {
  OwnerGate<kShare> gate;
  if (!gate.open()) return false;
  PendingSets& p = t_state.pending;
  const int i = pending - 1;
  if (i != p.count - 1) {
    p.sets[i] = p.sets[p.count - 1];
    p.sets[i].entry->pending = static_cast<std::uint8_t>(i + 1);
  }
  if (--p.count == 0 && kShare == Sharing::kSerialized) release_pending();
  q.pending = 0;
  q.word = 0;
  q.flag = 0;  // at the version the caller read: the engine's answer
  return true;
}
// cancel_pending at the thread level's Sharing (as record_pending_here).
[[gnu::always_inline]] inline bool cancel_pending_here(QueryCache::Entry& q, std::uint8_t pending) noexcept {
  if (!g_fast.share_pending) return cancel_pending<Sharing::kOwn>(q, pending);
  if (g_fast.gate_pending) return cancel_pending<Sharing::kGated>(q, pending);
  return cancel_pending<Sharing::kSerialized>(q, pending);
}

// MPI_THREAD_MULTIPLE, emulate mode: the change of an object whose delete callback the cache runs
// itself (change_from_cache), on the thread that owns the deferred sets. A second
// thread may make its first call while the callback runs: it ends deferral and applies the
// owner's sets to the engine (settle_elsewhere), the attribute the callback runs for included,
// and the owner then makes its change through the engine without running the callback again
// (change_after_callback). Meanwhile no other thread may change that object (say, delete the
// attribute and run the callback on its value a second time, a thing no order of the two calls
// does): the change is announced under the gate before the callback runs, and the thread that
// ends deferral holds the object for the owner in the engine (Engine::hold_object: other threads'
// changes of it wait as for callbacks the engine runs; the owner's change takes the hold over).
// Calls on other objects never wait for the owner's callback, which may itself wait for them.
// g_cache_change is read and written under g_pending_gate; holder nullptr: none announced.
struct CacheChange {
  const void* holder = nullptr;  // the owner's Engine::thread_token()
  Handle object = 0;
  ObjectKind kind = ObjectKind::Comm;
};
extern CacheChange g_cache_change;
// Announces the owner's change of (kind, h). False (nothing announced): deferral has ended, the
// engine's path makes the change.
bool announce_cache_change(ObjectKind kind, Handle h) noexcept;
// The announced change made: its end announced, and if deferral ended meanwhile, the object's
// hold released (unless the change through the engine took it over).
void end_cache_change(ObjectKind kind, Handle h) noexcept;
// The cache's own end of the announced change (`finish`: it defers the replacing set, or cancels
// the pending pair; at Sharing::kGateHeld: the gate is held here) with the end of the announcement,
// under one hold of the gate. False, nothing done: deferral ended, or `finish` failed (then the
// change is made through the engine, and end_cache_change follows).
template <typename Finish>
[[gnu::always_inline]] inline bool finish_cache_change(Finish& finish) noexcept {
  const std::uint8_t found = lock_gate();
  const bool done = found == kGateOpen && finish(std::integral_constant<Sharing, Sharing::kGateHeld>{});
  if (done) g_cache_change.holder = nullptr;
  unlock_gate(found);
  return done;
}

}  // namespace attrcheck::rt
