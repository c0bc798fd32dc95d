// Tests of the fast stack walk (src/engine/fast_unwind.cpp): on every stack it walks itself, it
// must give exactly what libgcc's DWARF unwinder (_Unwind_Backtrace) gives; where it gives up,
// capture_stack's full unwinder must.
#include "engine/fast_unwind.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <thread>
#include <vector>

#include "attrcheck/provenance.hpp"
#include "reference_unwind.hpp"

// provenance_nofp.cpp: `levels` frames built without frame pointers, rbp overwritten in each,
// then leaf(arg).
namespace provenance_nofp {
int descend(int levels, int (*leaf)(void* arg), void* arg);
}

namespace {

using attrcheck::detail::fast_backtrace;

constexpr int kMax = 512;

struct Walks {
  void* fast[kMax];
  int n_fast = -2;
  void* ref[kMax];
  int n_ref = 0;
  void* captured[kMax];  // capture_stack's (the fast walk, or the full unwinder where it gives up)
  int n_captured = 0;
};

// Walks this stack three ways. The fast walk starts at this function's caller (the return address
// in this frame); the reference's first frame is the call site of _Unwind_Backtrace below.
__attribute__((noinline)) int walk_all(void* arg) {
  auto* w = static_cast<Walks*>(arg);
  w->n_fast = fast_backtrace(__builtin_frame_address(0), w->fast, kMax, 0);
  w->n_ref = attrcheck_test::reference_backtrace(w->ref, kMax);
  w->n_captured = attrcheck::capture_stack(w->captured, attrcheck::kMaxStackDepth, 0);
  asm volatile("" ::: "memory");
  return 0;
}

// The fast walk did not give up and found exactly the reference's frames, to the end of the stack.
void expect_fast_walk_exact(const Walks& w) {
  ASSERT_GE(w.n_fast, 0) << "the fast walk gave up on this stack";
  ASSERT_GE(w.n_ref, 3);
  EXPECT_EQ(w.n_fast, w.n_ref - 1);
  for (int i = 0; i < w.n_fast && i + 1 < w.n_ref; ++i) EXPECT_EQ(w.fast[i], w.ref[i + 1]) << "frame " << i;
}

// capture_stack (frame 0: its own call site in walk_all) agrees with the reference from frame 1.
void expect_capture_matches(const Walks& w) {
  ASSERT_GE(w.n_captured, 2);
  const int expected = w.n_ref < attrcheck::kMaxStackDepth ? w.n_ref : attrcheck::kMaxStackDepth;
  EXPECT_EQ(w.n_captured, expected);
  for (int i = 1; i < w.n_captured && i < w.n_ref; ++i) EXPECT_EQ(w.captured[i], w.ref[i]) << "frame " << i;
}

TEST(FastUnwind, FramesWithoutFramePointers) {
  Walks w;
  provenance_nofp::descend(12, &walk_all, &w);
  expect_fast_walk_exact(w);
  expect_capture_matches(w);
}

TEST(FastUnwind, DeepRecursion) {
  Walks w;
  provenance_nofp::descend(600, &walk_all, &w);
  ASSERT_EQ(w.n_ref, kMax);  // deeper than the buffers: both stop at kMax frames
  ASSERT_EQ(w.n_fast, kMax);
  for (int i = 0; i + 1 < kMax; ++i) EXPECT_EQ(w.fast[i], w.ref[i + 1]) << "frame " << i;
  expect_capture_matches(w);
}

TEST(FastUnwind, SecondWalkFromTheTableIsTheSame) {
  // The first walk fills the thread's table, the second is served from it.
  Walks first, second;
  provenance_nofp::descend(20, &walk_all, &first);
  provenance_nofp::descend(20, &walk_all, &second);
  expect_fast_walk_exact(first);
  expect_fast_walk_exact(second);
  ASSERT_EQ(first.n_fast, second.n_fast);
  // Frame 0 is the leaf's call site in descend, 1..20 descend's own; 21 is each call's site here.
  for (int i = 0; i <= 20; ++i) EXPECT_EQ(first.fast[i], second.fast[i]) << "frame " << i;
  EXPECT_NE(first.fast[21], second.fast[21]);
  for (int i = 22; i < first.n_fast; ++i) EXPECT_EQ(first.fast[i], second.fast[i]) << "frame " << i;
}

TEST(FastUnwind, AnotherThread) {
  Walks w;
  std::thread([&] { provenance_nofp::descend(5, &walk_all, &w); }).join();
  expect_fast_walk_exact(w);
  expect_capture_matches(w);
}

TEST(FastUnwind, SkipAndMaxDepth) {
  Walks w;
  provenance_nofp::descend(12, &walk_all, &w);
  ASSERT_GE(w.n_fast, 10);
  // From the same frame as walk_all's: the frames below are this function's own walks.
  struct Partial {
    void* frames[4];
    int n;
  } p{};
  provenance_nofp::descend(
      12,
      [](void* arg) {
        auto* q = static_cast<Partial*>(arg);
        q->n = fast_backtrace(__builtin_frame_address(0), q->frames, 4, 3);
        asm volatile("" ::: "memory");
        return 0;
      },
      &p);
  ASSERT_EQ(p.n, 4);
  // Frames 3..6 of the full walk are descend's, the same in both (the leaf's call site is frame 0).
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p.frames[i], w.fast[i + 3]) << "frame " << i;
}

// ---- signal frames ------------------------------------------------------------------------------

Walks* g_signal_walks;
void on_signal(int) { walk_all(g_signal_walks); }

int raise_usr1(void*) { return raise(SIGUSR1); }

// The handler's walks should not be this thread's first: finding the thread's stack bounds and
// loading the full unwinder allocate (ThreadSanitizer rightly reports that inside a handler).
void warm_up() {
  attrcheck::warm_up_stack_capture();
  Walks w;
  provenance_nofp::descend(1, &walk_all, &w);
}

struct ScopedHandler {
  struct sigaction previous{};
  explicit ScopedHandler(int flags) {
    struct sigaction sa{};
    sa.sa_handler = &on_signal;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &previous);
  }
  ~ScopedHandler() { sigaction(SIGUSR1, &previous, nullptr); }
};

TEST(FastUnwind, ThroughASignalFrame) {
  // The handler's stack: walk_all, on_signal, the kernel's trampoline, then the interrupted code
  // (inside raise) and the frames without frame pointers that called it.
  warm_up();
  Walks w;
  g_signal_walks = &w;
  {
    ScopedHandler handler(0);
    provenance_nofp::descend(8, &raise_usr1, nullptr);
  }
  expect_fast_walk_exact(w);
  expect_capture_matches(w);
  EXPECT_GE(w.n_fast, 12);  // it went on past the signal frame
}

TEST(FastUnwind, AThreadsFirstWalkInASignalHandler) {
  // Finding the thread's stack bounds happens inside the handler (the fatal-signal handler can be
  // a thread's first capture): async-signal-safe, and the walk still goes through.
  Walks w;
  g_signal_walks = &w;
  {
    ScopedHandler handler(0);
    std::thread([] { provenance_nofp::descend(4, &raise_usr1, nullptr); }).join();
  }
  expect_fast_walk_exact(w);
  EXPECT_GE(w.n_fast, 8);
}

TEST(FastUnwind, OnAnAlternateSignalStackTheFullUnwinderWalks) {
  // The handler runs on a stack the fast walk has no bounds for: capture_stack must still be right.
  std::vector<char> alt(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  stack_t old{};
  ASSERT_EQ(sigaltstack(&ss, &old), 0);
  warm_up();
  Walks w;
  g_signal_walks = &w;
  {
    ScopedHandler handler(SA_ONSTACK);
    provenance_nofp::descend(8, &raise_usr1, nullptr);
  }
  sigaltstack(&old, nullptr);
  expect_capture_matches(w);
  EXPECT_GE(w.n_captured, 12);
}

// ---- frames outside the subset ------------------------------------------------------------------

// Realigns its stack to 64 bytes and keeps the old one in r12, so its CFA is r12 + 16: a rule the
// fast walk leaves to the full unwinder (compilers do the same through r10 with a CFA expression).
// int realigned(int (*fn)(void*), void* arg) calls fn(arg).
extern "C" int realigned(int (*fn)(void*), void* arg);
__asm__(
    ".text\n"
    ".globl realigned\n"
    ".type realigned, @function\n"
    "realigned:\n"
    ".cfi_startproc\n"
    "  push %r12\n"
    ".cfi_def_cfa_offset 16\n"
    ".cfi_offset r12, -16\n"
    "  mov %rsp, %r12\n"
    ".cfi_def_cfa_register r12\n"
    "  and $-64, %rsp\n"
    "  mov %rdi, %rax\n"
    "  mov %rsi, %rdi\n"
    "  call *%rax\n"
    "  add $1, %eax\n"
    "  mov %r12, %rsp\n"
    ".cfi_def_cfa_register rsp\n"
    "  pop %r12\n"
    ".cfi_def_cfa_offset 8\n"
    "  ret\n"
    ".cfi_endproc\n"
    ".size realigned, .-realigned\n");

int through_realigned(void* arg) { return realigned(&walk_all, arg); }

TEST(FastUnwind, UnsupportedFrameGoesToTheFullUnwinder) {
  Walks w;
  provenance_nofp::descend(3, &through_realigned, &w);
  EXPECT_EQ(w.n_fast, -1) << "realigned's CFA is r12 + 16; the fast walk should give up";
  expect_capture_matches(w);
}

// ---- modules unloaded and loaded again ----------------------------------------------------------

using CallThrough = int (*)(int (*)(void*), void*);

TEST(FastUnwind, ModuleReloadedAtTheSameAddressIsReadAnew) {
  // unwind_module_{a,b}: the same code, a different frame size. A's rule for the return address
  // into call_through, cached by the first walk, would read B's frame wrong.
  const std::uint64_t generation = attrcheck::detail::modules_generation();
  void* a = dlopen(ATTRCHECK_UNWIND_MODULE_A, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(a, nullptr) << dlerror();
  const auto through_a = reinterpret_cast<CallThrough>(dlsym(a, "call_through"));
  ASSERT_NE(through_a, nullptr);
  Walks wa;
  EXPECT_EQ(through_a(&walk_all, &wa), 1);
  expect_fast_walk_exact(wa);
  ASSERT_EQ(dlclose(a), 0);
  EXPECT_GT(attrcheck::detail::modules_generation(), generation);

  void* b = dlopen(ATTRCHECK_UNWIND_MODULE_B, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(b, nullptr) << dlerror();
  const auto through_b = reinterpret_cast<CallThrough>(dlsym(b, "call_through"));
  ASSERT_NE(through_b, nullptr);
  if (through_b != through_a) {
    dlclose(b);
    GTEST_SKIP() << "module B was loaded at another address than A: nothing stale to serve";
  }
  Walks wb;
  EXPECT_EQ(through_b(&walk_all, &wb), 1);
  expect_fast_walk_exact(wb);
  expect_capture_matches(wb);
  dlclose(b);
}

}  // namespace
