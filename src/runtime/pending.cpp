// Deferred sets (fast_path.hpp, "Deferred sets"): applying them to the engine, on the thread that
// made them or, at MPI_THREAD_SERIALIZED, on whichever thread calls MPI next; and handing them
// over when a thread exits with sets pending.
//
// At MPI_THREAD_SERIALIZED the program orders its MPI calls (a lock, a join, a barrier between
// threads): every call that sees pending_owner set to another thread's sets was made after that
// thread's calls returned, and that thread is not in MPI meanwhile, so this thread may apply its
// sets and update its query cache entries (which only that thread's MPI calls read). The one
// thing the program does not order is a thread's exit: a thread that exits with sets pending
// copies them, with their cache entries, into storage that outlives it (under `exit_mu`, which
// the applying side takes too), so pending_owner never points into a dead thread's storage.
#include <pthread.h>

#include <algorithm>
#include <mutex>

#include "runtime/runtime.hpp"

namespace attrcheck::rt {

__thread bool t_exit_hooked = false;

namespace {

std::mutex exit_mu;  // a thread's exit hand-over against another thread applying its sets

// The sets of threads that exited with sets pending, and copies of their cache entries.
PendingSets handed_over;
QueryCache::Entry handed_over_entries[PendingSets::kMax];

// Applies p's sets to the engine in the order they were made, and marks their cache entries
// current; p is left empty and pending_owner cleared.
void apply(PendingSets& p) noexcept {
  static const Api deferred{"MPI_Comm_set_attr", ObjectKind::Comm, nullptr};  // names nothing: lenient
  std::sort(p.sets, p.sets + p.count, [](const PendingSet& a, const PendingSet& b) { return a.stamp < b.stamp; });
  Engine& e = *state().engine;
  bool all = true;
  for (int i = 0; i < p.count; ++i) {
    const PendingSet& ps = p.sets[i];
    QueryCache::Entry& q = *ps.entry;
    q.pending = 0;
    const RanDelete ran{q.object, q.engine_key, ps.before, MPI_SUCCESS};
    const Origin origin = origin_at(ps.site);
    if (e.set_attr_ran(q.cursor, Binding::C, q.word, origin, ps.replaced ? &ran : nullptr)) continue;
    // Not expected (the set was checked against this very state): mirror it the general way.
    all = false;
    q.version = QueryCache::kNoAnswer;
    const Call call{&deferred, nullptr};
    ReplayScope replay(call, true);
    if (ps.replaced)
      replay.replay().seen.push_back(Observation{false, q.kind(), q.object, q.engine_key, ps.before, MPI_SUCCESS, 0, 0, false, 0});
    e.set_attr(q.kind(), q.object, q.engine_key, Binding::C, q.word, origin);
  }
  // The applied answers are the engine's now.
  const std::uint64_t version = e.version();
  for (int i = 0; i < p.count; ++i)
    if (all || p.sets[i].entry->version != QueryCache::kNoAnswer) p.sets[i].entry->version = version;
  p.count = 0;
  release_pending();
}

// A thread that took pending_owner exits: if its sets are still pending, they move to
// `handed_over` (the next call applies them), entries included.
void on_thread_exit(void*) noexcept {
  std::lock_guard<std::mutex> lock(exit_mu);
  PendingSets& p = t_pending;
  if (g_fast.pending_owner.load(std::memory_order_relaxed) != &p || p.count == 0) return;
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

void apply_pending() noexcept { apply(t_pending); }

void settle_elsewhere() noexcept {
  std::lock_guard<std::mutex> lock(exit_mu);
  PendingSets* o = g_fast.pending_owner.load(std::memory_order_acquire);
  if (o == &t_pending) {
    apply(t_pending);  // (own sets: settle() normally takes them; none left: just releases)
  } else if (o) {
    apply(*o);
  }
}

bool hook_thread_exit() noexcept {
  static pthread_key_t key;
  static const bool have_key = pthread_key_create(&key, on_thread_exit) == 0;
  // (A key's destructor runs only for a non-null value. The main thread's exit runs none: its
  // storage outlives the exit handlers.)
  t_exit_hooked = have_key && pthread_setspecific(key, &t_pending) == 0;
  return t_exit_hooked;
}

}  // namespace attrcheck::rt
