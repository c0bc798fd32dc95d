// What the inline paths (the wrappers' quick ways, the trampolines) read of the process state, on
// one cache line (g_fast): the engine's version counters, whether MPI runs, whether sets are
// deferred, and whose sets are pending. Set at load and as MPI starts and ends. Not a public
// header.
#pragma once

#include <atomic>
#include <cstdint>

namespace attrcheck::rt {

struct PendingSets;

// FastState::pending_owner: the owner of the pending sets, with the mode in the low bit (1: not
// shadow mode), so that one test says "shadow mode, and no thread's sets pending" (word() == 0).
// It also keeps the C get wrappers' version source (quick()): the engine's version counter while
// word() == 0, else kNever, a word that no cached answer's version equals. The get wrappers'
// inline path compares the entry's version with *quick(): one compare for "the answer is current,
// shadow mode, no thread's sets pending", where a test of the word after the version's cost three
// instructions more on every shadow get (emulate mode, and pending sets, take the branch where
// they fail: the entry's version is then compared with the engine's own).
class OwnerWord {
 public:
  // Odd, so no answer is ever stored with it (QueryCache::remember_answer), and neither 0 (an
  // empty entry's) nor QueryCache::kNoAnswer.
  static constexpr std::uint64_t kNeverVersion = 1;

  PendingSets* load(std::memory_order order) const noexcept {
    return reinterpret_cast<PendingSets*>(word_.load(order) & ~std::uintptr_t{1});
  }
  // Whether some thread's sets are pending (load() != nullptr).
  bool any() const noexcept { return word_.load(std::memory_order_relaxed) > 1; }
  [[gnu::always_inline]] void store(PendingSets* p, std::memory_order order) noexcept {
    const std::uintptr_t w = reinterpret_cast<std::uintptr_t>(p) | not_shadow_;
    // (The source first: a reader that sees the new word and the old source finds the old
    // source's answer current only while the word said so too; below MPI_THREAD_MULTIPLE the
    // program orders the calls anyway, and at MULTIPLE no set is deferred once a second thread
    // calls.)
    quick_.store(w == 0 ? counter_ : &kNever, std::memory_order_relaxed);
    word_.store(w, order);
  }
  std::uintptr_t word() const noexcept { return word_.load(std::memory_order_relaxed); }
  // The version a get's cached answer is current at in shadow mode with no sets pending.
  const std::atomic<std::uint64_t>* quick() const noexcept { return quick_.load(std::memory_order_relaxed); }
  // At load, before any wrapper runs (config.cpp); `counter`: Engine::version_counter().
  void set_mode(bool shadow, const std::atomic<std::uint64_t>* counter) noexcept {
    counter_ = counter;
    not_shadow_ = shadow ? 0 : 1;
    store(nullptr, std::memory_order_relaxed);
  }

 private:
  [[gnu::visibility("hidden")]] static const std::atomic<std::uint64_t> kNever;
  std::atomic<std::uintptr_t> word_{1};
  std::atomic<const std::atomic<std::uint64_t>*> quick_{&kNever};
  const std::atomic<std::uint64_t>* counter_ = &kNever;
  std::uintptr_t not_shadow_ = 1;
};

// What the inline path reads, on one cache line; set by the runtime.
enum : std::uint8_t { kDeferShadow = 1, kDeferEmulate = 2 };  // FastState::defer_sets
struct alignas(64) FastState {
  const std::atomic<std::uint64_t>* version = nullptr;  // Engine::version_counter()
  const std::atomic<std::uint64_t>* layout = nullptr;   // Engine::layout_counter()
  // Engine::fortran_values_flag(): read by every copy trampoline (trampolines.cpp).
  const std::atomic<bool>* fortran_values = nullptr;
  // MPI running: queries may be remembered only then (so nothing remembered outlives a close).
  std::atomic<bool> open{false};
  // Shadow and emulate mode: sets may be deferred (emulate: those that run no callback here,
  // set_path.hpp). Below MPI_THREAD_MULTIPLE no two threads call at once; at MULTIPLE only while
  // one thread calls (cleared for good when a second one does).
  // (Nonzero: the mode's kDefer*, so that the C set wrappers' one test of it also picks the
  // mode's quick way: gen_wrappers.py, split_set.)
  std::atomic<std::uint8_t> defer_sets{0};
  // From MPI_THREAD_SERIALIZED: another thread may call next; it settles the sets (pending_owner).
  bool share_pending = false;
  // MPI_THREAD_MULTIPLE: the owner changes its pending sets under g_pending_gate (pending.cpp).
  bool gate_pending = false;
  // A program whose Python frames are read (python/python_frames.hpp): a deferred set keeps the
  // Python frames it was made at, taken when it is deferred (PendingSet::origin).
  bool python_sites = false;
  // From MPI_THREAD_SERIALIZED, the deferred sets not applied yet, of whichever thread made them
  // (a thread's t_state.pending, or those of a thread that exited), or nullptr; at most one thread's
  // at a time. Below it, always nullptr; at MPI_THREAD_MULTIPLE only an exited thread's (the
  // live owner's are found through pending.cpp's g_gated_owner, so that its sets and deletes
  // neither claim nor release this word, and its gets keep the quick source).
  // (The low bit: the mode, OwnerWord.)
  OwnerWord pending_owner;
};
// (Hidden: read where they are, not through the GOT: one instruction fewer on every hot path.)
[[gnu::visibility("hidden")]] extern FastState g_fast;
// The stamp query cache entries are checked against: it moves whenever a keyval or object comes
// or goes, and when the runtime remaps a library keyval or MPI opens or closes
// (Engine::advance_layout).
inline std::uint64_t layout_stamp() noexcept { return g_fast.layout->load(std::memory_order_acquire); }

}  // namespace attrcheck::rt
