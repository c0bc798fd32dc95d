// The get wrappers' inline first resort: a query this thread already checked, answered from the
// per-thread query cache (fast/query_cache.hpp) while the engine has not changed. Everything else
// (the first call of a query, any refusal, predefined keys, truncation, a changed keyval or
// object, callbacks running, finalize) takes the full hook (hooks/get_hook.cpp). Part of the
// runtime's face to the generated wrappers (with hooks.hpp, set_path.hpp and call_counts.hpp):
// they include it by this path.
//
// A hit is the same decision the full hook would make: the entry's stamps prove that nothing its
// checks depend on has changed. In shadow mode the call still goes to the library and the answer
// is still compared with the model's on every call.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "runtime/process/fast_state.hpp"
#include "runtime/fast/pending.hpp"
#include "runtime/fast/query_cache.hpp"
#include "runtime/fast/refresh_answer.hpp"
#include "runtime/hooks.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// The cached query with a current answer, or nullptr (then call the full hook). An answer read
// at the version the engine still has needs no layout check: every layout change is a version
// change.
inline const QueryCache::Entry* checked_query(const Api& api, Handle h, int key) noexcept {
  // (Another thread's pending sets may change the answer: the full hook applies them first.)
  // The same test as cached_query's with the get wrappers' (whose quick_answer fails while any
  // thread's sets are pending): a condition added to one belongs in the other.
  if (api.replacement || t_state.ctx.cb_top || pending_elsewhere()) return nullptr;
  QueryCache::Entry* q = t_state.queries.lookup(api.kind, api.binding, h, key);
  if (!q) return nullptr;
  const std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  return QueryCache::has_answer(*q, version) || refresh_answer(*q, version) ? q : nullptr;
}

// The C get wrappers' inline first resort (gen_wrappers.py): the cached query, whatever its
// stamps, or nullptr (then the wrapper's out-of-line path decides). No test of the mode:
// t_state.ctx.cb_top == nullptr also says that attrcheck is on, since with mode=off no call ever
// passes enter_slow, which alone clears kUnchecked. The callers then test quick_answer(), and
// where it fails current_answer() and pending_elsewhere() (another thread's pending sets may
// change the answer: the out-of-line path applies them first).
inline const QueryCache::Entry* cached_query(const Api& api, Handle h, int key) noexcept {
  if (api.replacement || t_state.ctx.cb_top) return nullptr;  // (with the callers': checked_query's test)
  return t_state.queries.lookup(api.kind, api.binding, h, key);
}

// Whether q's answer is current, in shadow mode with no thread's sets pending (OwnerWord::quick):
// then the C get wrappers cross-check it without more ado. Else emulate mode answers, and shadow
// mode with this thread's own sets pending cross-checks as usual (it holds them), if
// current_answer() and not pending_elsewhere().
inline bool quick_answer(const QueryCache::Entry& q) noexcept {
  return QueryCache::has_answer(q, g_fast.pending_owner.quick()->load(std::memory_order_acquire));
}
inline bool current_answer(const QueryCache::Entry& q) noexcept {
  return QueryCache::has_answer(q, g_fast.version->load(std::memory_order_acquire));
}

// The get wrappers' out-pointers, kept on the stack across the library's call (keep_in_memory
// before and after it): two stores and two loads, where gcc otherwise gave them two callee-saved
// registers, which cost two pushes, two pops and four moves.
struct GetOut {
  void* value;
  int* flag;
};
[[gnu::always_inline]] inline void keep_in_memory(GetOut& o) noexcept { __asm__("" : "+m"(o)); }

// The cached query a set can take the quick way (set_cached), or nullptr (then call the full
// hook). A hit proves what the full hook's checks would prove, as for gets (a query is found
// valid at the current layout only while MPI runs, and t_state.ctx.cb_top == nullptr says the thread
// passed the thread-level check and runs no callback of ours), and carries the engine's cursor
// for the set.
inline QueryCache::Entry* checked_set(const Api& api, Handle h, int key) noexcept {
  if (api.replacement || t_state.ctx.cb_top) return nullptr;
  QueryCache::Entry* q = t_state.queries.find(api.kind, api.binding, h, key, layout_stamp());
  return q && q->cursor.object ? q : nullptr;
}
// checked_set without the layout test, for a caller that makes it, or finds the entry's answer
// current, which vouches for it (the C set wrappers' set_deferred): the layout counter's load and
// compare, four instructions, on every deferred shadow set.
inline QueryCache::Entry* set_entry(const Api& api, Handle h, int key) noexcept {
  if (api.replacement || t_state.ctx.cb_top) return nullptr;
  QueryCache::Entry* q = t_state.queries.lookup(api.kind, api.binding, h, key);
  return q && q->cursor.object ? q : nullptr;
}

inline std::size_t value_size(Binding as) noexcept { return as == Binding::FortranInt ? 4 : 8; }

// Emulate mode: the model's answer is the answer.
inline int answer(Binding as, int model_flag, std::uint64_t model_word, void* value_out, int* flag) noexcept {
  *flag = model_flag;
  if (model_flag) std::memcpy(value_out, &model_word, value_size(as));
  return MPI_SUCCESS;
}
inline int answer(const QueryCache::Entry& q, void* value_out, int* flag) noexcept {
  return answer(q.binding(), q.flag, q.word, value_out, flag);
}

// Whether a get's answer (flag, and the value at value_out) is the model's.
inline bool same_answer(Binding as, const void* value_out, int flag, int model_flag, std::uint64_t model_word) noexcept {
  if ((flag != 0) != (model_flag != 0)) return false;
  if (!model_flag) return true;
  if (as == Binding::FortranInt) {
    std::uint32_t v, w;
    std::memcpy(&v, value_out, sizeof v);
    std::memcpy(&w, &model_word, sizeof w);
    return v == w;
  }
  std::uint64_t v;
  std::memcpy(&v, value_out, sizeof v);
  return v == model_word;
}

// Shadow mode: whether the library's answer to a get of the cached query `q` (rc, and what it
// stored) is the model's. Read after the library's call: a get that succeeds runs no code that
// could change this thread's cache (no callbacks; an error handler only runs when rc says so,
// and then the model's answer is not used).
// (The model's flag is 0 or 1, like the libraries' own: equal flags settle it in one compare.
// Flags that differ, say 2 for 1, are left to compare_with_model, which also takes a nonzero
// flag as "present": *flag is then read once, in one compare with the entry's.)
// (rc is tested in an asm statement: from `rc == MPI_SUCCESS` gcc knew the wrapper returns 0 and
// made it again, an `xor` on every get, where rc is still in the return register.)
[[gnu::always_inline]] inline bool succeeded(int rc) noexcept {
  static_assert(MPI_SUCCESS == 0, "succeeded() tests rc against 0");
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__)
  bool zero;
  __asm__("testl %1, %1" : "=@ccz"(zero) : "r"(rc));
  return zero;
#else
  return rc == MPI_SUCCESS;
#endif
}
inline bool agrees(Binding as, const QueryCache::Entry& q, int rc, const void* value_out, const int* flag) noexcept {
  if (!succeeded(rc) || *flag != q.flag) return false;
  // (A get of a value that is there is the one laid out straight.)
  return __builtin_expect(q.flag != 0, 1) ? same_answer(as, value_out, 1, 1, q.word) : true;
}

// Shadow mode: compares the library's answer (rc, and what it stored) with the model's and
// reports a difference as impl.divergence; returns rc.
// (h, engine_key: the attribute's, for a C read of a Fortran-set value, which both answer with a
// pointer to their own copy of the integer: the integers are compared.)
int compare_with_model(const Call& call, Handle h, int key, int engine_key, int rc, const void* value_out,
                       const int* flag, int model_flag, std::uint64_t model_word) noexcept;

// The C get wrappers' way out when agrees() says no: compare_with_model for the cached query `q`,
// out of line, with nothing the wrapper must build on its stack.
[[gnu::cold]] int get_diverged(const Api* api, const void* caller, const QueryCache::Entry* q, int rc,
                               const void* value_out, const int* flag) noexcept;

// Shadow mode: forwards the get and compares the library's answer with the cached model answer.
template <typename Forward>
inline int cross_check(const Api& api, const void* caller, const QueryCache::Entry& q, void* value_out, int* flag,
                       Forward&& forward) {
  const int model_flag = q.flag;
  const std::uint64_t model_word = q.word;
  const int rc = forward();
  if (__builtin_expect(rc == MPI_SUCCESS && same_answer(api.binding, value_out, *flag, model_flag, model_word), 1))
    return rc;
  return compare_with_model(Call{&api, caller}, q.object, q.key(), q.engine_key, rc, value_out, flag, model_flag,
                            model_word);
}

}  // namespace attrcheck::rt
