// What the run intercepted: the keyval, attribute and object calls the wrappers received and the
// callbacks run under attrcheck, by family and binding, for the report ("intercepted"). A report
// without findings then still shows that the attribute calls were checked, not missed.
//
// Each thread counts into a block of its own (one writer: a plain load and store, no locked
// instruction); the blocks are never freed, so the report (a fatal-signal handler's too) sums
// them all without a lock. A thread's block goes back to a pool when the thread ends, for the next
// new thread, whose counts add to it.
#pragma once

#include <atomic>
#include <cstdint>

#include "report/report.hpp"
#include "runtime/fast_path.hpp"
#include "runtime/mpi_profile.hpp"

namespace attrcheck::rt {

enum class Family : std::uint8_t { Keyval, Attribute, Object, Callback };
enum class Lang : std::uint8_t { C, Fortran, F08 };  // mpif.h and `use mpi` share their entry points

struct CallCounts {
  std::atomic<std::uint64_t> n[kCallFamilies][kCallBindings] = {};
  CallCounts* next = nullptr;       // the list of every block (append only)
  std::atomic<bool> taken{false};   // a live thread counts into it
};

extern __thread CallCounts* t_call_counts;
CallCounts* claim_call_counts() noexcept;  // nullptr: none could be had (the call goes uncounted)

inline void count_call(Family f, Lang l) noexcept {
  CallCounts* c = t_call_counts;
  if (__builtin_expect(!c, 0) && !(c = claim_call_counts())) return;
  std::atomic<std::uint64_t>& n = c->n[static_cast<int>(f)][static_cast<int>(l)];
  n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// A C wrapper's call. Where the library's Fortran bindings enter through the C ones (MPICH), a C
// call made under a Fortran wrapper is that Fortran call again, counted there.
template <Family F>
inline void count_c_call() noexcept {
  if constexpr (kProfile.fortran_enters_through_c)
    if (t_state.ctx.cb_top == &kInFortran) return;
  count_call(F, Lang::C);
}

// Sums every block (async-signal-safe): RunInfo::call_counts.
void read_call_counts(std::uint64_t out[kCallFamilies][kCallBindings]) noexcept;

}  // namespace attrcheck::rt
