// The blocks behind call_counts.hpp.
#include "runtime/call_counts.hpp"

#include <pthread.h>

#include <new>

namespace attrcheck::rt {

__thread CallCounts* t_call_counts = nullptr;

namespace {
std::atomic<CallCounts*> g_blocks{nullptr};

void release(void* block) noexcept {
  t_call_counts = nullptr;
  static_cast<CallCounts*>(block)->taken.store(false, std::memory_order_release);
}

pthread_key_t exit_key() noexcept {
  static pthread_key_t key;
  static const bool made = pthread_key_create(&key, release) == 0;
  return made ? key : pthread_key_t{};
}
}  // namespace

CallCounts* claim_call_counts() noexcept {
  CallCounts* c = nullptr;
  for (CallCounts* b = g_blocks.load(std::memory_order_acquire); b && !c; b = b->next) {
    bool free = false;
    if (b->taken.compare_exchange_strong(free, true, std::memory_order_acq_rel)) c = b;
  }
  if (!c) {
    c = new (std::nothrow) CallCounts;
    if (!c) return nullptr;
    c->taken.store(true, std::memory_order_relaxed);
    CallCounts* head = g_blocks.load(std::memory_order_relaxed);
    do c->next = head;
    while (!g_blocks.compare_exchange_weak(head, c, std::memory_order_acq_rel, std::memory_order_relaxed));
  }
  // Given back when the thread ends (the main thread's stays taken: nothing ends it before exit).
  pthread_setspecific(exit_key(), c);
  t_call_counts = c;
  return c;
}

void read_call_counts(std::uint64_t out[kCallFamilies][kCallBindings]) noexcept {
  for (int f = 0; f < kCallFamilies; ++f)
    for (int b = 0; b < kCallBindings; ++b) out[f][b] = 0;
  for (const CallCounts* c = g_blocks.load(std::memory_order_acquire); c; c = c->next)
    for (int f = 0; f < kCallFamilies; ++f)
      for (int b = 0; b < kCallBindings; ++b) out[f][b] += c->n[f][b].load(std::memory_order_relaxed);
}

}  // namespace attrcheck::rt
