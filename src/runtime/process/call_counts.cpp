// The registry behind call_counts.hpp: every thread's counts, summed for the report.
#include "runtime/process/call_counts.hpp"

#include <pthread.h>

namespace attrcheck::rt {

namespace {
// The blocks of live threads that registered (a slot is nullptr when free), and what ended
// threads counted. A thread past kThreads live ones is counted only once it ends.
constexpr int kThreads = 1024;
std::atomic<CallCounts*> g_live[kThreads];
std::atomic<std::uint64_t> g_ended[kCallFamilies][kCallBindings];

// A registered thread ends: its block leaves the registry first, then its counts join the
// total, so that a concurrent reader counts them at most once (it may miss them meanwhile).
void fold(void* block) noexcept {
  auto* c = static_cast<CallCounts*>(block);
  for (std::atomic<CallCounts*>& slot : g_live) {
    CallCounts* mine = c;
    if (slot.compare_exchange_strong(mine, nullptr, std::memory_order_acq_rel)) break;
  }
  for (int f = 0; f < kCallFamilies; ++f)
    for (int b = 0; b < kCallBindings; ++b) {
      g_ended[f][b].fetch_add(c->n[f][b].load(std::memory_order_relaxed), std::memory_order_relaxed);
      c->n[f][b].store(0, std::memory_order_relaxed);
    }
}

pthread_key_t exit_key(bool* made) noexcept {
  static pthread_key_t key;
  static const bool ok = pthread_key_create(&key, fold) == 0;
  *made = ok;
  return key;
}
}  // namespace

void register_call_counts() noexcept {
  CallCounts* c = &t_state.counts;
  c->registered = true;
  bool made = false;
  const pthread_key_t key = exit_key(&made);
  // (The main thread's exit runs no destructor: its block outlives the exit handlers.)
  if (made) pthread_setspecific(key, c);
  for (std::atomic<CallCounts*>& slot : g_live) {
    CallCounts* none = nullptr;
    if (slot.load(std::memory_order_relaxed) == nullptr &&
        slot.compare_exchange_strong(none, c, std::memory_order_acq_rel))
      return;
  }
}

void read_call_counts(std::uint64_t out[kCallFamilies][kCallBindings]) noexcept {
  for (int f = 0; f < kCallFamilies; ++f)
    for (int b = 0; b < kCallBindings; ++b) out[f][b] = g_ended[f][b].load(std::memory_order_relaxed);
  for (const std::atomic<CallCounts*>& slot : g_live)
    if (const CallCounts* c = slot.load(std::memory_order_acquire))
      for (int f = 0; f < kCallFamilies; ++f)
        for (int b = 0; b < kCallBindings; ++b) out[f][b] += c->n[f][b].load(std::memory_order_relaxed);
}

}  // namespace attrcheck::rt
