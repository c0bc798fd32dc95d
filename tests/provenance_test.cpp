// Tests of include/attrcheck/provenance.hpp: raw stack capture and the StackDepot.
#include "attrcheck/provenance.hpp"

#include <gtest/gtest.h>

#include <execinfo.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <new>
#include <thread>
#include <vector>

#include "reference_unwind.hpp"

// provenance_nofp.cpp: `levels` frames built without frame pointers, rbp overwritten in each,
// then leaf(arg).
namespace provenance_nofp {
int descend(int levels, int (*leaf)(void* arg), void* arg);
}

namespace {

using attrcheck::capture_stack;
using attrcheck::kMaxStackDepth;
using attrcheck::Origin;
using attrcheck::StackDepot;

// A synthetic stack of `depth` frames whose addresses are derived from `seed`.
std::vector<void*> fake_stack(std::uintptr_t seed, int depth) {
  std::vector<void*> frames;
  for (int i = 0; i < depth; ++i)
    frames.push_back(reinterpret_cast<void*>(0x400000u + seed * 0x1000u + static_cast<std::uintptr_t>(i) * 8u));
  return frames;
}

// Recurses `levels` times, then captures with `max_depth`. noinline and work after the call keep
// every level a real frame.
__attribute__((noinline)) int capture_at_depth(int levels, int max_depth, void** frames) {
  if (levels > 0) {
    const int n = capture_at_depth(levels - 1, max_depth, frames);
    asm volatile("" ::: "memory");
    return n;
  }
  return capture_stack(frames, max_depth, 0);
}

// Captures the same stack twice from one frame, once with skip 0 and once with skip 1.
__attribute__((noinline)) void capture_with_and_without_skip(void** a, int* na, void** b, int* nb) {
  *na = capture_stack(a, 16, 0);
  *nb = capture_stack(b, 16, 1);
  asm volatile("" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// capture_stack
// ---------------------------------------------------------------------------------------------

struct TwoStacks {
  void* ours[kMaxStackDepth];
  int n_ours;
  void* reference[kMaxStackDepth + 8];
  int n_reference;
};

// Captures the stack with capture_stack and with the reference unwinder from the same frame.
__attribute__((noinline)) int capture_both(void* arg) {
  auto* s = static_cast<TwoStacks*>(arg);
  s->n_ours = capture_stack(s->ours, kMaxStackDepth, 0);
  s->n_reference = attrcheck_test::reference_backtrace(s->reference, kMaxStackDepth + 8);
  asm volatile("" ::: "memory");
  return 0;
}

TEST(CaptureStack, FramesWithoutFramePointersMatchTheDwarfUnwinder) {
  TwoStacks s{};
  provenance_nofp::descend(12, &capture_both, &s);
  // Both start at capture_both (ours[0] and reference[0]: its two call sites); from its caller
  // on, through the 13 frames of descend, they must be the same return addresses.
  ASSERT_GE(s.n_ours, 14);
  ASSERT_GE(s.n_reference, 14);
  const int common = std::min(s.n_ours, s.n_reference);
  for (int i = 1; i < common; ++i) EXPECT_EQ(s.ours[i], s.reference[i]) << "frame " << i;
}

TEST(CaptureStack, ReturnsAtLeastOneFrame) {
  void* frames[kMaxStackDepth] = {};
  const int n = capture_stack(frames, kMaxStackDepth, 0);
  EXPECT_GT(n, 0);
  EXPECT_LE(n, kMaxStackDepth);
  for (int i = 0; i < n; ++i) EXPECT_NE(frames[i], nullptr) << "frame " << i;
}

TEST(CaptureStack, RespectsMaxDepth) {
  // 30 extra frames: the real stack is deeper than every limit below.
  for (int max_depth : {1, 2, 5, 17}) {
    void* frames[kMaxStackDepth + 1];
    std::fill(std::begin(frames), std::end(frames), reinterpret_cast<void*>(0x5a5a));
    const int n = capture_at_depth(30, max_depth, frames);
    EXPECT_EQ(n, max_depth) << "max_depth " << max_depth;
    // Nothing written past max_depth.
    EXPECT_EQ(frames[max_depth], reinterpret_cast<void*>(0x5a5a)) << "max_depth " << max_depth;
  }
}

TEST(CaptureStack, ZeroMaxDepthCapturesNothing) {
  void* frame = reinterpret_cast<void*>(0x5a5a);
  EXPECT_EQ(capture_stack(&frame, 0, 0), 0);
  EXPECT_EQ(frame, reinterpret_cast<void*>(0x5a5a));
}

TEST(CaptureStack, DeeperRecursionGivesIdenticalOuterFrames) {
  // Two captures from the same recursion differ only in how deep they are: the outermost
  // frames (main, gtest) are the same.
  void* a[kMaxStackDepth];
  void* b[kMaxStackDepth];
  const int na = capture_at_depth(3, kMaxStackDepth, a);
  const int nb = capture_at_depth(5, kMaxStackDepth, b);
  ASSERT_GT(na, 4);
  if (nb < kMaxStackDepth) {  // not cut off: b has exactly 2 more recursion frames
    EXPECT_EQ(nb, na + 2);
    for (int i = 1; i <= 4; ++i) EXPECT_EQ(a[na - i], b[nb - i]) << "outer frame " << i;
  }
}

TEST(CaptureStack, SkipDropsInnermostFrames) {
  void* a[16];
  void* b[16];
  int na = 0, nb = 0;
  capture_with_and_without_skip(a, &na, b, &nb);
  ASSERT_GT(na, 2);
  ASSERT_GT(nb, 1);
  // b skipped the frame of capture_with_and_without_skip: b[i] is a[i + 1].
  for (int i = 0; i < std::min(nb, na - 1); ++i) EXPECT_EQ(b[i], a[i + 1]) << "frame " << i;
}

// ---------------------------------------------------------------------------------------------
// StackDepot
// ---------------------------------------------------------------------------------------------

TEST(StackDepot, StartsEmpty) {
  StackDepot depot;
  EXPECT_EQ(depot.size(), 0u);
}

TEST(StackDepot, EmptyStackIsIdZero) {
  StackDepot depot;
  void* frame = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(depot.intern(nullptr, 0), 0u);
  EXPECT_EQ(depot.intern(&frame, 0), 0u);
  EXPECT_EQ(depot.size(), 0u);
}

TEST(StackDepot, IdZeroAndUnknownIdsHaveNoFrames) {
  StackDepot depot;
  EXPECT_TRUE(depot.frames(0).empty());
  EXPECT_TRUE(depot.frames(1).empty());
  const auto s = fake_stack(1, 3);
  const Origin id = depot.intern(s.data(), 3);
  EXPECT_TRUE(depot.frames(0).empty());
  EXPECT_TRUE(depot.frames(id + 1).empty());
  EXPECT_TRUE(depot.frames(0xffffffffu).empty());
}

TEST(StackDepot, IdenticalStacksAreInternedOnce) {
  StackDepot depot;
  const auto s = fake_stack(7, 5);
  const Origin first = depot.intern(s.data(), 5);
  EXPECT_NE(first, 0u);
  EXPECT_EQ(depot.size(), 1u);
  // A different vector with equal contents is the same stack.
  const auto copy = fake_stack(7, 5);
  EXPECT_EQ(depot.intern(copy.data(), 5), first);
  EXPECT_EQ(depot.intern(s.data(), 5), first);
  EXPECT_EQ(depot.size(), 1u);
}

TEST(StackDepot, DifferentStacksGetDifferentIds) {
  StackDepot depot;
  const auto s1 = fake_stack(1, 5);
  const auto s2 = fake_stack(2, 5);
  auto s3 = fake_stack(1, 5);
  s3[4] = reinterpret_cast<void*>(0x99);  // differs in the last frame only
  const Origin a = depot.intern(s1.data(), 5);
  const Origin b = depot.intern(s2.data(), 5);
  const Origin c = depot.intern(s3.data(), 5);
  const Origin prefix = depot.intern(s1.data(), 4);  // a prefix of s1 is another stack
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(c, 0u);
  EXPECT_NE(prefix, 0u);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  EXPECT_NE(a, prefix);
  EXPECT_EQ(depot.size(), 4u);
}

TEST(StackDepot, FramesRoundTrip) {
  StackDepot depot;
  std::vector<std::vector<void*>> stacks;
  std::vector<Origin> ids;
  for (int i = 1; i <= 20; ++i) {
    stacks.push_back(fake_stack(static_cast<std::uintptr_t>(i), i % 7 + 1));
    ids.push_back(depot.intern(stacks.back().data(), static_cast<int>(stacks.back().size())));
  }
  for (std::size_t i = 0; i < stacks.size(); ++i) EXPECT_EQ(depot.frames(ids[i]), stacks[i]) << i;
}

TEST(StackDepot, CaptureFromTheSameSiteIsOneStack) {
  StackDepot depot;
  std::vector<Origin> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(depot.capture(16));
  EXPECT_NE(ids[0], 0u);
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);
  EXPECT_EQ(depot.size(), 1u);
  const Origin other = depot.capture(16);  // another call site
  EXPECT_NE(other, 0u);
  EXPECT_NE(other, ids[0]);
  EXPECT_EQ(depot.size(), 2u);
}

__attribute__((noinline)) Origin capture_and_compare(StackDepot& depot, std::vector<void*>* direct) {
  const Origin id = depot.capture(16);
  void* frames[16];
  const int n = capture_stack(frames, 16, 0);
  direct->assign(frames, frames + n);
  asm volatile("" ::: "memory");
  return id;
}

TEST(StackDepot, CaptureStoresTheCallersStack) {
  StackDepot depot;
  std::vector<void*> direct;
  const Origin id = capture_and_compare(depot, &direct);
  const std::vector<void*> stored = depot.frames(id);
  ASSERT_EQ(stored.size(), direct.size());
  ASSERT_GT(stored.size(), 1u);
  // Frame 0 is the call site inside capture_and_compare (two different lines); the rest is the
  // same stack.
  EXPECT_NE(stored[0], direct[0]);
  for (std::size_t i = 1; i < stored.size(); ++i) EXPECT_EQ(stored[i], direct[i]) << "frame " << i;
}

// capture_from from the frame of `inner`, and a direct walk (capture_stack_from, which remembers
// nothing) of the same stack. inner is called from one call site in middle; middle from
// outer_a or outer_b, identical functions called from the same place: inner's frame and return
// address are the same both times, the stack further out is not.
struct FromCapture {
  Origin id;
  const void* frame;
  std::vector<void*> direct;
};
__attribute__((noinline)) void inner(StackDepot& depot, FromCapture* out) {
  const void* frame = __builtin_frame_address(0);
  const void* caller = __builtin_return_address(0);
  out->frame = frame;
  out->id = depot.capture_from(frame, caller, 16);
  void* frames[16];
  const int n = attrcheck::capture_stack_from(frame, caller, frames, 16);
  out->direct.assign(frames, frames + n);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void middle(StackDepot& depot, FromCapture* out) {
  inner(depot, out);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void outer_a(StackDepot& depot, FromCapture* out) {
  middle(depot, out);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void outer_b(StackDepot& depot, FromCapture* out) {
  middle(depot, out);
  asm volatile("" ::: "memory");
}

TEST(StackDepot, CaptureFromTheSameFrameUnderAnotherStackIsThatStack) {
  // capture_from remembers its walks with the stack words they read: from the same frame, with the
  // same return address, but under another caller further out, it must walk again.
  StackDepot depot;
  std::vector<FromCapture> got;
  for (int round = 0; round < 3; ++round) {
    for (auto* outer : {&outer_a, &outer_b}) {
      FromCapture c;
      outer(depot, &c);
      got.push_back(c);
    }
  }
  ASSERT_EQ(got[0].frame, got[1].frame) << "inner's frame moved: the test does not reach the case it is for";
  for (const FromCapture& c : got) {
    ASSERT_NE(c.id, 0u);
    EXPECT_EQ(depot.frames(c.id), c.direct);
  }
  EXPECT_NE(got[0].id, got[1].id);
  for (std::size_t i = 2; i < got.size(); ++i) EXPECT_EQ(got[i].id, got[i % 2].id) << i;
  EXPECT_EQ(depot.size(), 2u);
}

TEST(StackDepot, CaptureRespectsMaxDepth) {
  StackDepot depot;
  const Origin id = depot.capture(3);
  EXPECT_EQ(depot.frames(id).size(), 3u);
}

TEST(StackDepot, ADepotBuiltWhereAnotherWasSharesNoRecentStacks) {
  // Each thread remembers the stacks it interned last; a new depot in a destroyed one's storage
  // must not be answered from that memory.
  alignas(StackDepot) unsigned char storage[sizeof(StackDepot)];
  const auto s1 = fake_stack(31, 6);
  const auto s2 = fake_stack(32, 6);
  auto* a = new (storage) StackDepot;
  EXPECT_EQ(a->intern(s1.data(), 6), 1u);
  EXPECT_EQ(a->intern(s2.data(), 6), 2u);
  EXPECT_EQ(a->intern(s2.data(), 6), 2u);  // from the thread's memory
  a->~StackDepot();
  auto* b = new (storage) StackDepot;
  EXPECT_EQ(b->intern(s2.data(), 6), 1u);
  EXPECT_EQ(b->size(), 1u);
  EXPECT_EQ(b->frames(1), s2);
  b->~StackDepot();
}

TEST(StackDepot, RepeatedStacksFromOneSiteStayDistinct) {
  // Stacks that share their innermost frame (one call site, different callers) share a set in the
  // thread's memory: each must still get its own id, every time.
  StackDepot depot;
  std::vector<std::vector<void*>> stacks;
  for (int i = 0; i < 5; ++i) {
    stacks.push_back(fake_stack(40, 8));
    stacks.back()[7] = reinterpret_cast<void*>(0x9000u + static_cast<std::uintptr_t>(i) * 16u);
  }
  std::vector<Origin> ids;
  for (const auto& st : stacks) ids.push_back(depot.intern(st.data(), 8));
  for (int round = 0; round < 3; ++round)
    for (std::size_t i = 0; i < stacks.size(); ++i) EXPECT_EQ(depot.intern(stacks[i].data(), 8), ids[i]) << i;
  EXPECT_EQ(depot.size(), stacks.size());
}

TEST(StackDepot, ConcurrentInterningIsConsistent) {
  StackDepot depot;
  constexpr int kShared = 200;     // every thread interns these, in its own order
  constexpr int kPerThread = 100;  // and these, which only it interns
  constexpr int kThreads = 4;
  std::vector<std::vector<void*>> shared;
  for (int i = 0; i < kShared; ++i) shared.push_back(fake_stack(static_cast<std::uintptr_t>(i), i % 9 + 1));

  std::vector<std::vector<Origin>> shared_ids(kThreads, std::vector<Origin>(kShared));
  std::vector<std::vector<Origin>> own_ids(kThreads, std::vector<Origin>(kPerThread));
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int round = 0; round < 3; ++round) {
        for (int j = 0; j < kShared; ++j) {
          const int i = (t % 2 == 0) ? j : kShared - 1 - j;
          const Origin id = depot.intern(shared[i].data(), static_cast<int>(shared[i].size()));
          if (round == 0)
            shared_ids[t][i] = id;
          else if (shared_ids[t][i] != id)
            shared_ids[t][i] = 0;  // inconsistency: caught below
        }
        for (int j = 0; j < kPerThread; ++j) {
          const auto s = fake_stack(static_cast<std::uintptr_t>(100000 + t * 1000 + j), 4);
          own_ids[t][j] = depot.intern(s.data(), 4);
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(depot.size(), static_cast<std::size_t>(kShared + kThreads * kPerThread));
  std::map<Origin, int> owner;  // id -> which stack
  for (int i = 0; i < kShared; ++i) {
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_NE(shared_ids[t][i], 0u) << "thread " << t << " stack " << i;
      EXPECT_EQ(shared_ids[t][i], shared_ids[0][i]) << "thread " << t << " stack " << i;
    }
    EXPECT_TRUE(owner.emplace(shared_ids[0][i], i).second) << "id reused for stack " << i;
    EXPECT_EQ(depot.frames(shared_ids[0][i]), shared[i]) << "stack " << i;
  }
  for (int t = 0; t < kThreads; ++t) {
    for (int j = 0; j < kPerThread; ++j) {
      ASSERT_NE(own_ids[t][j], 0u);
      EXPECT_TRUE(owner.emplace(own_ids[t][j], -1).second) << "thread " << t << " stack " << j;
      EXPECT_EQ(depot.frames(own_ids[t][j]),
                fake_stack(static_cast<std::uintptr_t>(100000 + t * 1000 + j), 4));
    }
  }
}

}  // namespace
