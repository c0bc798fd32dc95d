// Raw stack capture and the stack depot (each distinct stack stored once).
#include "attrcheck/provenance.hpp"

#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "fast_unwind.hpp"

namespace attrcheck {

// The full unwinder, for the stacks the fast walk (fast_unwind.cpp) leaves to it. glibc's backtrace() goes through libgcc's _Unwind_Backtrace, which finds and
// interprets each frame's DWARF CFI anew on every call: ~1,400 instructions a frame, ~20,000 for an
// ordinary MPI call's stack, which made every keyval creation 65x the library's (callgrind).
// libunwind's unw_backtrace keeps a per-thread cache of each return address's frame layout (where
// the CFA is, where the caller's rbp was saved, both read from the same DWARF CFI) and walks a
// cached frame in a few dozen instructions; a frame it cannot describe that way (a signal frame,
// an unusual CFA rule) makes it finish with its full DWARF unwinder. So stacks stay exact in code
// built without frame pointers, which a plain rbp walk would get wrong (Debian's libraries and most
// user code are -fomit-frame-pointer).
// It is loaded with dlopen(RTLD_LOCAL), never linked: libunwind.so also defines backtrace() and the
// _Unwind_* ABI, and linking it would put those in place of glibc's and libgcc's for the whole host
// program (C++ exceptions included). Without it (libunwind8 not installed), backtrace() is used.
namespace {
using BacktraceFn = int (*)(void**, int);

BacktraceFn load_unwinder() noexcept {
  void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return &backtrace;
  void* fn = dlsym(lib, "unw_backtrace");
  return fn ? reinterpret_cast<BacktraceFn>(fn) : &backtrace;
}

// Chosen once, on first use (StackDepot's constructor makes that first use happen early, outside
// any MPI call).
BacktraceFn unwinder() noexcept {
  static const BacktraceFn fn = load_unwinder();
  return fn;
}
}  // namespace

namespace {
// A capture by the full unwinder; `caller` is the return address into capture_stack's caller.
// Inlined, so that the frames above the unwinder's call are the same as capture_stack's own.
__attribute__((always_inline)) inline int full_capture(void* caller, void** frames, int max_depth, int skip) noexcept {
  void* buffer[kMaxStackDepth + 24];
  const int want = std::min(max_depth + skip + 8, static_cast<int>(sizeof buffer / sizeof *buffer));
  const int got = unwinder()(buffer, want);
  // Where our caller's frame starts is found, not assumed: a sanitizer's backtrace() interceptor
  // or an inlined frame would shift it.
  int first = -1;
  for (int i = 0; i < got && i < 8 && first < 0; ++i)
    if (buffer[i] == caller) first = i;
  if (first < 0) first = std::min(got, 1);  // buffer[0] is this function's own frame
  first = std::min(got, first + skip);
  const int n = std::min(got - first, max_depth);
  std::memcpy(frames, buffer + first, static_cast<std::size_t>(n) * sizeof(void*));
  return n;
}
}  // namespace

// noinline: __builtin_return_address(0) must be the return address into our caller, and
// __builtin_frame_address(0) makes this function keep a frame pointer, where the fast walk starts.
__attribute__((noinline)) int capture_stack(void** frames, int max_depth, int skip) noexcept {
  if (!frames || max_depth <= 0) return 0;
  if (skip < 0) skip = 0;
  if (const int n = detail::fast_backtrace(__builtin_frame_address(0), frames, max_depth, skip); n >= 0) return n;
  return full_capture(__builtin_return_address(0), frames, max_depth, skip);
}

namespace {
// capture_stack_from's full unwinder: the stack from `caller` on.
__attribute__((noinline)) int full_capture_from(const void* caller, void** frames, int max_depth) noexcept {
  void* buffer[kMaxStackDepth + 24];
  const int want = std::min(max_depth + 24, static_cast<int>(sizeof buffer / sizeof *buffer));
  const int got = unwinder()(buffer, want);
  int first = 0;  // `caller` not found: the whole stack (a report drops attrcheck's innermost frames)
  for (int i = 0; i < got; ++i)
    if (buffer[i] == caller) {
      first = i;
      break;
    }
  const int n = std::min(got - first, max_depth);
  std::memcpy(frames, buffer + first, static_cast<std::size_t>(n) * sizeof(void*));
  return n;
}
}  // namespace

__attribute__((noinline)) int capture_stack_from(const void* frame, const void* caller, void** frames,
                                                 int max_depth) noexcept {
  if (!frames || max_depth <= 0) return 0;
  if (frame)
    if (const int n = detail::fast_backtrace(frame, frames, max_depth, 0); n >= 0) return n;
  return full_capture_from(caller, frames, max_depth);
}

void warm_up_stack_capture() noexcept {
  // Both unwinders: the fast walk finds this thread's stack bounds (pthread_getattr_np allocates
  // for the main thread), and the full one is loaded and run once.
  void* frame[1];
  capture_stack(frame, 1, 0);
  full_capture(nullptr, frame, 1, 0);
}

namespace {
// Never 0: a thread's empty memory names no depot.
std::atomic<std::uint64_t> g_depot_serial{0};

// The stacks this thread interned last, direct-mapped by their innermost frame (the call site: a
// create's and a free's differ): a hit compares the frames and returns the id, with no hash and
// no lock. Keyed by the depot's serial, never its address, so a depot destroyed and another built
// in its place share nothing.
struct RecentStack {
  std::uint64_t depot;
  Origin id;
  int depth;
  void* frames[32];
};
struct RecentSet {
  RecentStack way[2];  // way[0] the most recently stored
};
constexpr int kRecentSets = 4;
__thread RecentSet t_recent[kRecentSets];
}  // namespace

StackDepot::StackDepot() : serial_(g_depot_serial.fetch_add(1, std::memory_order_relaxed) + 1) {}

namespace {
std::uint64_t hash_frames(void* const* frames, int depth) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ static_cast<std::uint64_t>(depth);
  for (int i = 0; i < depth; ++i) {
    h ^= reinterpret_cast<std::uintptr_t>(frames[i]);
    h *= 0x100000001b3ULL;
    h ^= h >> 29;
  }
  return h;
}
}  // namespace

Origin StackDepot::intern(void* const* frames, int depth) {
  if (!frames || depth <= 0) return 0;
  depth = std::min(depth, kMaxStackDepth);
  RecentSet& set = t_recent[(reinterpret_cast<std::uintptr_t>(frames[0]) * 0x9e3779b97f4a7c15ULL) >> 62];
  static_assert(kRecentSets == 4, "the top 2 bits pick the set");
  for (const RecentStack& recent : set.way)
    if (recent.depot == serial_ && recent.depth == depth && std::equal(frames, frames + depth, recent.frames))
      return recent.id;
  const Origin id = intern_locked(frames, depth, hash_frames(frames, depth));
  if (depth <= static_cast<int>(sizeof set.way[0].frames / sizeof *set.way[0].frames)) {
    set.way[1] = set.way[0];
    RecentStack& recent = set.way[0];
    recent.depot = 0;
    std::copy(frames, frames + depth, recent.frames);
    recent.depth = depth;
    recent.id = id;
    recent.depot = serial_;
  }
  return id;
}

Origin StackDepot::intern_locked(void* const* frames, int depth, std::uint64_t h) {
  std::lock_guard<std::mutex> lock(mu_);
  auto range = by_hash_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    const Key& k = stacks_[it->second - 1];
    if (static_cast<int>(k.depth) == depth &&
        std::equal(frames, frames + depth, storage_.begin() + k.offset))
      return it->second;
  }
  const Key key{static_cast<std::uint32_t>(storage_.size()), static_cast<std::uint32_t>(depth)};
  storage_.insert(storage_.end(), frames, frames + depth);
  stacks_.push_back(key);
  const Origin id = static_cast<Origin>(stacks_.size());
  by_hash_.emplace(h, id);
  return id;
}

__attribute__((noinline)) Origin StackDepot::capture(int max_depth, int skip) {
  void* frames[kMaxStackDepth];
  const int n = capture_stack(frames, std::min(max_depth, kMaxStackDepth), skip + 1);
  return intern(frames, n);
}

namespace {
// The walks capture_from made last on this thread, with the stack words each read and the stack it
// interned (fast_unwind.hpp, WalkLog): a capture from the same frame whose words all read the same
// again is that stack, found without walking or interning. Keyed by the frame and its return
// address; 2-way set-associative (a create's and a free's wrapper frames often lie at the same
// address, called from the same function, and differ in the return address).
struct WalkMemo {
  std::uint64_t depot;  // 0: empty, or being filled
  std::uint64_t modules;
  const void* frame;
  const void* caller;
  int max_depth;
  Origin id;
  detail::WalkLog log;
};
struct MemoSet {
  WalkMemo way[2];
  int newest;
};
constexpr int kMemoSets = 4;
__thread MemoSet t_memo[kMemoSets];
// A capture_from is using t_memo on this thread: a signal handler's capture leaves it alone.
__thread bool t_memo_busy;
}  // namespace

// The check of the remembered walks, inline, kept apart from the walk (capture_walked, out of
// line): a hit then costs no prologue saving the registers and no frame the walk needs.
[[gnu::always_inline]] inline Origin StackDepot::capture_remembered(const void* frame, const void* caller, int max_depth) {
  const auto key = reinterpret_cast<std::uintptr_t>(frame) ^ (reinterpret_cast<std::uintptr_t>(caller) * 0x9e3779b97f4a7c15ULL);
  MemoSet& set = t_memo[(key * 0xff51afd7ed558ccdULL) >> 62];
  static_assert(kMemoSets == 4, "the top 2 bits pick the set");
  const std::uint64_t modules = detail::modules_generation();  // before the walk: a dlclose during it voids it
  for (int w = 0; w < 2; ++w) {
    const WalkMemo& m = set.way[w];
    if (m.frame == frame && m.caller == caller && m.depot == serial_ && m.max_depth == max_depth &&
        m.modules == modules && detail::stack_unchanged(m.log))
      return m.id;
  }
  return capture_walked(frame, caller, max_depth, modules, &set);
}

Origin StackDepot::capture_from(const void* frame, const void* caller, int max_depth) {
  max_depth = std::min(max_depth, kMaxStackDepth);
  if (!frame || max_depth <= 0 || t_memo_busy) return capture_walked(frame, caller, max_depth, 0, nullptr);
  t_memo_busy = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const Origin id = capture_remembered(frame, caller, max_depth);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_memo_busy = false;
  return id;
}

__attribute__((noinline)) Origin StackDepot::capture_walked(const void* frame, const void* caller, int max_depth,
                                                            std::uint64_t modules, void* memo_set) {
  void* frames[kMaxStackDepth];
  if (!memo_set) return intern(frames, capture_stack_from(frame, caller, frames, max_depth));  // not remembered
  MemoSet& set = *static_cast<MemoSet*>(memo_set);
  WalkMemo& m = set.way[set.newest ^ 1];
  m.depot = 0;
  const int n = detail::fast_backtrace_logged(frame, frames, max_depth, &m.log);
  if (n < 0) return intern(frames, full_capture_from(caller, frames, max_depth));
  const Origin id = intern(frames, n);
  if (m.log.reads <= detail::kWalkLogReads) {
    m.modules = modules;
    m.frame = frame;
    m.caller = caller;
    m.max_depth = max_depth;
    m.id = id;
    m.depot = serial_;
    set.newest ^= 1;
  }
  return id;
}

std::vector<void*> StackDepot::frames(Origin id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id == 0 || id > stacks_.size()) return {};
  const Key& k = stacks_[id - 1];
  return std::vector<void*>(storage_.begin() + k.offset, storage_.begin() + k.offset + k.depth);
}

std::size_t StackDepot::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stacks_.size();
}

}  // namespace attrcheck
