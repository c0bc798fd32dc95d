// What the run intercepted: the keyval, attribute and object calls the wrappers received and the
// callbacks run under attrcheck, by family and binding, for the report ("intercepted"). A report
// without findings then still shows that the attribute calls were checked, not missed.
//
// Each thread counts in its own thread-local block (t_state.counts: one writer, a load, an add and
// a store on the thread's TLS block, no test, no locked instruction). A thread's block is
// registered on its first call through a full hook (enter_slow: every thread's first call takes
// it), and folded into a process-wide total when the thread ends; the report (a fatal-signal
// handler's too) sums the total and the registered blocks without a lock (the registry:
// call_counts.cpp). The generated wrappers include it through runtime/call_counts.hpp.
#pragma once

#include <atomic>
#include <cstdint>

#include "report/report.hpp"
#include "runtime/process/thread_state.hpp"
#include "runtime/profile/mpi_profile.hpp"

namespace attrcheck::rt {

enum class Family : std::uint8_t { Keyval, Attribute, Object, Callback };
enum class Lang : std::uint8_t { C, Fortran, F08 };  // mpif.h and `use mpi` share their entry points

inline void count_call(Family f, Lang l) noexcept {
  std::atomic<std::uint64_t>& n = t_state.counts.n[static_cast<int>(f)][static_cast<int>(l)];
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

// Registers this thread's counts for the report (once; enter_slow).
void register_call_counts() noexcept;
inline void register_call_counts_once() noexcept {
  if (__builtin_expect(!t_state.counts.registered, 0)) register_call_counts();
}

// Sums every thread's counts (async-signal-safe): RunInfo::call_counts.
void read_call_counts(std::uint64_t out[kCallFamilies][kCallBindings]) noexcept;

}  // namespace attrcheck::rt
