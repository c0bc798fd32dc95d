// MPI_THREAD_MULTIPLE, shadow mode: the frees under way (see frees_under_way.hpp): their slots,
// the windows opened and closed on them, and the waits for them.
#include "runtime/process/frees_under_way.hpp"

#include <atomic>
#include <thread>

#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

struct FreeUnderWay {
  std::atomic<Handle> handle{0};
  std::atomic<const void*> thread{nullptr};
};

namespace {
constexpr int kFreesUnderWay = 16;
FreeUnderWay frees_under_way[kFreesUnderWay];
// How many FreeWindows are open: raised before a free claims its slot (so before the library can
// hand the handle out again) and lowered after it let the slot go, so a registration that reads 0
// has no slot to look through (a dup at MULTIPLE would otherwise search all 16 slots).
std::atomic<int> frees_open{0};
}  // namespace

// Opens a window on `h` for this thread: frees_open raised first, then a free slot claimed.
// nullptr: all slots taken (the free goes unguarded; frees_open is lowered again).
FreeUnderWay* open_window(Handle h) noexcept {
  frees_open.fetch_add(1, std::memory_order_acq_rel);
  for (FreeUnderWay& f : frees_under_way) {
    Handle none = 0;
    if (f.handle.load(std::memory_order_relaxed) == 0 &&
        f.handle.compare_exchange_strong(none, h, std::memory_order_acq_rel)) {
      f.thread.store(thread_token(), std::memory_order_release);
      return &f;
    }
  }
  frees_open.fetch_sub(1, std::memory_order_release);
  return nullptr;
}

void close_window(FreeUnderWay* f) noexcept {
  f->thread.store(nullptr, std::memory_order_relaxed);
  f->handle.store(0, std::memory_order_release);
  frees_open.fetch_sub(1, std::memory_order_release);
}

__thread FreeUnderWay* t_deferred_frees[kDeferredHeld];
__thread int t_deferred_free_count = 0;

// Waits while another thread's free of `h` is under way (FreeWindow).
void wait_for_free_of(Handle h) noexcept {
  if (state().thread_level < MPI_THREAD_MULTIPLE || frees_open.load(std::memory_order_acquire) == 0) return;
  for (FreeUnderWay& f : frees_under_way)
    while (f.handle.load(std::memory_order_acquire) == h && f.thread.load(std::memory_order_acquire) != thread_token())
      std::this_thread::yield();
}

void hold_deferred_free(Handle h) noexcept {
  if (state().thread_level < MPI_THREAD_MULTIPLE || h == 0 || t_deferred_free_count == kDeferredHeld) return;
  for (int i = 0; i < t_deferred_free_count; ++i)
    if (t_deferred_frees[i]->handle.load(std::memory_order_relaxed) == h) return;
  if (FreeUnderWay* f = open_window(h)) t_deferred_frees[t_deferred_free_count++] = f;
}

}  // namespace attrcheck::rt
