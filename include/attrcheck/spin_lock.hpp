// attrcheck's spin lock, shared by the engine (its lock, Engine::Impl::mu_) and the runtime (the
// keyval quarantine's and the library-key map's locks, src/runtime/process/keyvals.cpp).
#pragma once

#include <atomic>
#include <thread>

namespace attrcheck {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Critical sections never run user code and never block, so a spinning lock (one atomic
// exchange to take, one store to release) is cheaper than a mutex on the hot set/delete path.
// A host whose calls never overlap switches it off (Engine::drop_locking, the runtime's
// drop_keyval_locking): the exchange is a locked instruction that costs as much as a tenth of an
// MPI library's whole set.
class SpinLock {
 public:
  void lock() noexcept {
    if (!enabled_.load(std::memory_order_relaxed)) return;
    if (__builtin_expect(!locked_.exchange(true, std::memory_order_acquire), 1)) return;
    wait();
  }
  // lock() when another thread holds it. (Out of line: the callers' frames stay small.)
  [[gnu::noinline]] void wait() noexcept {
    for (unsigned spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 128) {
          cpu_relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() noexcept {
    if (enabled_.load(std::memory_order_relaxed)) locked_.store(false, std::memory_order_release);
  }
  // Whether lock and unlock take the lock (a caller whose fast path holds no frame tests it and
  // leaves the locked case to its general path).
  bool enabled() const noexcept { return enabled_.load(std::memory_order_relaxed); }
  // From now on lock and unlock do nothing (a host whose calls never overlap any more). A holder
  // still inside finishes first.
  void disable() noexcept {
    lock();
    unlock();
    enabled_.store(false, std::memory_order_relaxed);
  }

 private:
  std::atomic<bool> locked_{false};
  std::atomic<bool> enabled_{true};
};

}  // namespace attrcheck
