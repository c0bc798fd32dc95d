// Deferred sets (pending_sets.hpp, "Deferred sets"): applying them to the engine, on the thread
// that made them or, from MPI_THREAD_SERIALIZED, on another thread; and handing them over when a
// thread exits with sets pending.
//
// At MPI_THREAD_SERIALIZED the program orders its MPI calls (a lock, a join, a barrier between
// threads): every call that sees pending_owner set to another thread's sets was made after that
// thread's calls returned, and that thread is not in MPI meanwhile, so this thread may apply its
// sets and update its query cache entries (which only that thread's MPI calls read).
// At MPI_THREAD_MULTIPLE sets are deferred only while one thread calls MPI (a program that asks
// for MULTIPLE and calls from one thread, as mpi4py does by default): the thread that initialised
// MPI, whose sets g_gated_owner names from then on (hold_pending_owner; pending_owner stays
// clear, so neither its sets nor its gets take the ways for another thread's pending sets, and
// its sets do not claim and release it). The first call of a second thread (and any call that
// finds another thread's sets pending) ends deferral for good and applies the owner's sets,
// which the owner may be using at that very moment: the owner changes its pending sets only
// under g_pending_gate, and the applying thread reads the owner's entries under it without
// writing them; it marks the sets `applied`, closes the gate (kGateClosed: the owner defers no
// more) and forgets g_gated_owner, and the owner clears its entries' marks under the gate
// before it uses them again (absorb).
// The one thing the program does not order is a thread's exit: a thread that exits with sets
// pending copies them, with their cache entries, into storage that outlives it (under the gate,
// which the applying side takes too), so pending_owner never points into a dead thread's storage.
#include "runtime/fast/pending.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "runtime/callbacks/replay.hpp"
#include "runtime/process/provenance.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

__thread bool t_exit_hooked = false;
std::atomic<std::uint8_t> g_pending_gate{kGateOpen};
// MPI_THREAD_MULTIPLE: the sets of the thread that initialised MPI while it may defer them, or
// nullptr. Changed under the gate.
std::atomic<PendingSets*> g_gated_owner{nullptr};

std::uint8_t gate_not_open(std::uint8_t found) noexcept {
  // (kGateClosed: the exchange took it, and the unlock gives the state back.)
  for (unsigned spins = 0; found == kGateHeld; ++spins) {
    if (spins > 64) sched_yield();
    if (g_pending_gate.load(std::memory_order_relaxed) != kGateHeld)
      found = g_pending_gate.exchange(kGateHeld, std::memory_order_acquire);
  }
  return found;
}

void keep_python_origin_of(QueryCache::Entry& q, const void* site) noexcept {
  if (q.pending) t_state.pending.sets[q.pending - 1].origin = pending_python_origin(site);
}

Origin pending_python_origin(const void* site) noexcept {
  try {
    return origin_python_site(site);
  } catch (...) {  // (the depot's memory)
    return 0;
  }
}

namespace {

struct GateLock {
  GateLock() noexcept : found(lock_gate()) {}
  ~GateLock() { unlock_gate(found); }
  GateLock(const GateLock&) = delete;
  GateLock& operator=(const GateLock&) = delete;
  std::uint8_t found;  // what the unlock leaves (kGateClosed: deferral ended, settle_elsewhere)
};

// The sets of threads that exited with sets pending, and copies of their cache entries.
PendingSets handed_over;
QueryCache::Entry handed_over_entries[PendingSets::kMax];

// Applies p's sets to the engine in the order they were made, and (`entries`: the applying
// thread may write them) marks their cache entries current and empties p; pending_owner is
// cleared. Without `entries` (another thread's, at MPI_THREAD_MULTIPLE) the entries are only
// read, and p is marked `applied` for its owner to absorb.
void apply(PendingSets& p, bool entries) noexcept {
  static const Api deferred{"MPI_Comm_set_attr", ObjectKind::Comm, nullptr};  // names nothing: lenient
  if (!entries) p.applied.store(true, std::memory_order_relaxed);  // (before the engine changes)
  // In the order they were made (sorting indices: the owner may be reading p.sets meanwhile).
  std::uint8_t order[PendingSets::kMax];
  for (int i = 0; i < p.count; ++i) order[i] = static_cast<std::uint8_t>(i);
  std::sort(order, order + p.count, [&p](int a, int b) { return p.sets[a].stamp < p.sets[b].stamp; });
  Engine& e = *state().engine;
  bool all = true;
  for (int n = 0; n < p.count; ++n) {
    const PendingSet& ps = p.sets[order[n]];
    QueryCache::Entry& q = *ps.entry;
    if (entries) q.pending = 0;
    const RanDelete ran{q.object, q.engine_key, ps.before, MPI_SUCCESS};
    const Origin origin = ps.origin ? ps.origin : origin_at(ps.site);
    if (e.set_attr_ran(q.cursor, Binding::C, q.word, origin, ps.replaced ? &ran : nullptr)) continue;
    // Not expected (the set was checked against this very state): mirror it the general way.
    all = false;
    if (entries) q.version = QueryCache::kNoAnswer;
    const Call call{&deferred, nullptr};
    ReplayScope replay(call, true);
    if (ps.replaced)
      replay.replay().seen.push_back(Observation{false, q.kind(), q.object, q.engine_key, MPI_SUCCESS, ps.before, 0, 0, false, 0});
    e.set_attr(q.kind(), q.object, q.engine_key, Binding::C, q.word, origin);
  }
  if (entries) {
    // The applied answers are the engine's now.
    const std::uint64_t version = e.version();
    for (int i = 0; i < p.count; ++i)
      if (all || p.sets[i].entry->version != QueryCache::kNoAnswer) p.sets[i].entry->version = version;
    p.count = 0;
  }
  release_pending();
}

// The owner's side of sets another thread applied: its entries' marks go (their answers are out
// of date: the engine moved), and the sets with them. Gate held.
void absorb(PendingSets& p) noexcept {
  for (int i = 0; i < p.count; ++i) {
    p.sets[i].entry->pending = 0;
    p.sets[i].entry->version = QueryCache::kNoAnswer;
  }
  p.count = 0;
  p.applied.store(false, std::memory_order_relaxed);
}

// This thread's own sets (gate held where the thread level needs it).
void apply_own() noexcept {
  if (t_state.pending.applied.load(std::memory_order_relaxed)) absorb(t_state.pending);
  else apply(t_state.pending, true);
}

// A thread that took pending_owner, or g_gated_owner, exits: if its sets are still pending, they
// move to `handed_over` (the next call applies them), entries included.
void on_thread_exit(void*) noexcept {
  GateLock lock;
  PendingSets& p = t_state.pending;
  const bool gated = g_gated_owner.load(std::memory_order_relaxed) == &p;
  if (gated) g_gated_owner.store(nullptr, std::memory_order_relaxed);
  if ((!gated && g_fast.pending_owner.load(std::memory_order_relaxed) != &p) || p.count == 0 ||
      p.applied.load(std::memory_order_relaxed))
    return;
  handed_over.count = p.count;
  handed_over.clock = p.clock;
  for (int i = 0; i < p.count; ++i) {
    handed_over_entries[i] = *p.sets[i].entry;
    handed_over.sets[i] = p.sets[i];
    handed_over.sets[i].entry = &handed_over_entries[i];
  }
  p.count = 0;
  g_fast.pending_owner.store(&handed_over, std::memory_order_release);
}

}  // namespace

void apply_pending() noexcept {
  if (!g_fast.gate_pending) return apply(t_state.pending, true);
  GateLock lock;
  apply_own();
}

void settle_elsewhere() noexcept {
  GateLock lock;
  // MPI_THREAD_MULTIPLE: a second thread calls MPI (or finds another's sets pending): no set is
  // deferred from now on.
  if (g_fast.gate_pending) {
    g_fast.defer_sets.store(0, std::memory_order_relaxed);
    lock.found = kGateClosed;
  }
  PendingSets* o = g_fast.pending_owner.load(std::memory_order_acquire);
  if (o == &t_state.pending) {
    apply_own();  // (own sets: settle() normally takes them; none left: just releases)
  } else if (o) {
    // At MULTIPLE a live thread's entries are its own to write; handed-over ones are copies.
    apply(*o, !g_fast.gate_pending || o == &handed_over);
  }
  // MULTIPLE: the sets of the thread that initialised MPI, if it lives (its entries are its own).
  if (PendingSets* g = g_gated_owner.load(std::memory_order_relaxed)) {
    g_gated_owner.store(nullptr, std::memory_order_relaxed);
    if (g == &t_state.pending) {
      apply_own();
    } else {
      apply(*g, false);
      // Its change of an object whose delete callback the cache is running (set_path.hpp,
      // CacheChange): the object is held for it (after its sets went in: applying them must
      // not wait for the hold).
      if (const CacheChange c = g_cache_change; c.holder) state().engine->hold_object(c.kind, c.object, c.holder);
    }
  }
}

CacheChange g_cache_change;

bool announce_cache_change(ObjectKind kind, Handle h) noexcept {
  GateLock lock;
  if (lock.found != kGateOpen) return false;
  g_cache_change = CacheChange{Engine::thread_token(), h, kind};
  return true;
}

void end_cache_change(ObjectKind kind, Handle h) noexcept {
  bool closed;
  {
    GateLock lock;
    g_cache_change.holder = nullptr;
    closed = lock.found == kGateClosed;
  }
  if (closed) state().engine->release_hold(kind, h);
}

bool hold_pending_owner() noexcept {
  GateLock lock;
  if (!hook_thread_exit()) {
    lock.found = kGateClosed;  // (no set is deferred: the gate says so to the owner's side too)
    return false;
  }
  g_gated_owner.store(&t_state.pending, std::memory_order_relaxed);
  return true;
}

bool hook_thread_exit() noexcept {
  static pthread_key_t key;
  static const bool have_key = pthread_key_create(&key, on_thread_exit) == 0;
  // (A key's destructor runs only for a non-null value. The main thread's exit runs none: its
  // storage outlives the exit handlers.)
  t_exit_hooked = have_key && pthread_setspecific(key, &t_state.pending) == 0;
  return t_exit_hooked;
}

}  // namespace attrcheck::rt
