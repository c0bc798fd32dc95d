// The get wrappers' inline first resort: a query this thread already checked, answered from the
// per-thread query cache (runtime/query_cache.hpp) while the engine has not changed. Everything
// else (the first call of a query, any refusal, predefined keys, truncation, a changed keyval or
// object, callbacks running, finalize) takes the full hook in hooks.cpp.
//
// A hit is the same decision the full hook would make: the entry's stamps prove that nothing its
// checks depend on has changed. In shadow mode the call still goes to the library and the answer
// is still compared with the model's on every call.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "report/report.hpp"
#include "runtime/hooks.hpp"
#include "runtime/mpi_profile.hpp"
#include "runtime/fast/query_cache.hpp"
#include "runtime/process/thread_state.hpp"

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

// For a cached query whose answer is out of date: if the query is still valid, reads the
// engine's answer into it. False if the full hook must decide (the query's validity may have
// changed, an error, a truncated value, or the version read mid-change so no answer could be
// kept).
bool refresh_answer(QueryCache::Entry& q, std::uint64_t version) noexcept;

// Applies this thread's pending sets.
void apply_pending() noexcept;
// From MPI_THREAD_SERIALIZED: applies the pending sets of another thread (pending_owner). At
// SERIALIZED the program's serialisation of its MPI calls orders them before this call (that
// thread is not in MPI now): the applying thread also updates that thread's query cache entries.
// At MULTIPLE this thread is a second one calling MPI: deferral ends for good, and the sets are
// applied under the gate, marking them `applied` for their owner. A thread that exits with sets
// pending hands them over first (pending.cpp), so they never point into freed storage.
void settle_elsewhere() noexcept;
// Another thread's sets are pending (then answers read from the engine, and cached answers, may
// be out of date): call settle_elsewhere.
inline bool pending_elsewhere() noexcept {
  return __builtin_expect(g_fast.pending_owner.any(), 0) &&
         g_fast.pending_owner.load(std::memory_order_relaxed) != &t_state.pending;
}
inline void settle() noexcept {
  if (__builtin_expect(t_state.pending.count != 0, 0)) apply_pending();
  else if (__builtin_expect(g_fast.pending_owner.any(), 0)) settle_elsewhere();
}
// How the owner's changes to its pending sets are shared with other threads, by thread level:
// kOwn below MPI_THREAD_SERIALIZED (no other thread calls); kSerialized: the thread that defers
// its first set takes pending_owner (claim_pending), and gives it back with its last one
// (release_pending); kGated (MPI_THREAD_MULTIPLE): the thread that initialised MPI owns the
// pending sets from then on (hold_pending_owner: only it defers sets, until a second thread
// calls and ends deferral), and changes them under g_pending_gate.
// (The callers pick it with record_pending_here / cancel_pending_here: set_path.hpp.)
enum class Sharing : std::uint8_t { kOwn, kSerialized, kGated };
// The first set a thread defers: at MPI_THREAD_SERIALIZED the thread takes pending_owner, unless
// another thread's sets are pending (false: then this set is mirrored on the spot, which applies
// them first). Registers the thread's exit hand-over (pending.cpp) the first time.
extern __thread bool t_exit_hooked;
bool hook_thread_exit() noexcept;  // false: it cannot be (no set of this thread is deferred)
// MPI_THREAD_MULTIPLE, at MPI's start on the thread that started it: that thread owns the pending
// sets while they are deferred, without pending_owner (pending.cpp: the thread whose first call
// ends deferral finds them all the same). False: it cannot (its exit hand-over cannot be
// registered): no set is to be deferred.
bool hold_pending_owner() noexcept;
template <Sharing kShare>
[[gnu::always_inline]] inline bool claim_pending() noexcept {
  if (kShare != Sharing::kSerialized) return true;  // (kGated: owned since MPI started)
  if (g_fast.pending_owner.any()) return false;
  if (__builtin_expect(!t_exit_hooked, 0) && !hook_thread_exit()) return false;
  g_fast.pending_owner.store(&t_state.pending, std::memory_order_relaxed);
  return true;
}
// The thread's last pending set went (applied, or cancelled by a delete): at
// MPI_THREAD_SERIALIZED the word is given back (at MULTIPLE it is not taken: claiming and
// releasing it cost ~20 instructions a set + delete there, MPICH, callgrind).
// (always_inline, as lock_gate: gcc called both out of line from the cancelling delete, ~9
// instructions a set + delete at MPI_THREAD_MULTIPLE, MPICH, callgrind.)
[[gnu::always_inline]] inline void release_pending() noexcept {
  g_fast.pending_owner.store(nullptr, std::memory_order_relaxed);
}
// MPI_THREAD_MULTIPLE: the owner's changes to its pending sets, another thread's settling of
// them and a thread's exit hand-over exclude each other through this spin lock (uncontended
// while one thread calls: an exchange and a store). Its state also says whether sets may still
// be deferred: the thread that ends deferral (settle_elsewhere) leaves it kGateClosed, so the
// owner's one exchange both takes the gate and finds deferral on (kGateOpen), where a test of
// defer_sets and of its sets' `applied` mark came after it (~6 instructions a set + delete).
// Whoever takes it (exchange kGateHeld) gives back the state it found (unlock_gate).
inline constexpr std::uint8_t kGateOpen = 0, kGateHeld = 1, kGateClosed = 2;
extern std::atomic<std::uint8_t> g_pending_gate;
// The gate was not open: waits while another thread holds it, then takes it; returns the state
// found (kGateOpen or kGateClosed).
std::uint8_t gate_not_open(std::uint8_t found) noexcept;
[[gnu::always_inline]] inline std::uint8_t lock_gate() noexcept {
  const std::uint8_t found = g_pending_gate.exchange(kGateHeld, std::memory_order_acquire);
  return __builtin_expect(found == kGateOpen, 1) ? kGateOpen : gate_not_open(found);
}
inline void unlock_gate(std::uint8_t found) noexcept { g_pending_gate.store(found, std::memory_order_release); }
// The owner's side: holds the gate at MPI_THREAD_MULTIPLE (no-op below); open(): sets may still
// be deferred (at MULTIPLE: the gate is not closed; then no other thread has applied this
// thread's sets either, since the thread that does also closes it, for good, under the gate).
template <Sharing kShare>
class OwnerGate {
 public:
  [[gnu::always_inline]] OwnerGate() noexcept : found_(kShare == Sharing::kGated ? lock_gate() : kGateOpen) {}
  [[gnu::always_inline]] ~OwnerGate() {
    if (kShare == Sharing::kGated) unlock_gate(found_);
  }
  [[gnu::always_inline]] bool open() const noexcept { return found_ == kGateOpen; }
  OwnerGate(const OwnerGate&) = delete;
  OwnerGate& operator=(const OwnerGate&) = delete;

 private:
  std::uint8_t found_;
};

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
