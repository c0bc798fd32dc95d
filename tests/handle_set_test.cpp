// The runtime's set of freed handles (src/runtime/process/handle_set.hpp), against std::set as a model:
// random inserts and erases over a small universe (so runs of colliding entries form and erasing
// shifts them back), handle 0, growth, clear.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>

#include "runtime/process/handle_set.hpp"

namespace {

using attrcheck::Handle;
using attrcheck::rt::HandleSet;

TEST(HandleSet, EmptySetHoldsNothing) {
  HandleSet s;
  EXPECT_FALSE(s.contains(1));
  EXPECT_FALSE(s.contains(0));
  EXPECT_FALSE(s.erase(1));
  EXPECT_EQ(s.size(), 0u);
}

TEST(HandleSet, ZeroIsAHandleLikeAnyOther) {
  HandleSet s;
  EXPECT_TRUE(s.insert(0));
  EXPECT_FALSE(s.insert(0));
  EXPECT_TRUE(s.contains(0));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_TRUE(s.erase(0));
  EXPECT_FALSE(s.contains(0));
  EXPECT_EQ(s.size(), 0u);
}

TEST(HandleSet, SameHandleInsertedAndErasedAgainAndAgain) {  // a dup + free loop
  HandleSet s;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(s.insert(0x84000002));
    ASSERT_TRUE(s.contains(0x84000002));
    ASSERT_TRUE(s.erase(0x84000002));
    ASSERT_FALSE(s.contains(0x84000002));
  }
  EXPECT_EQ(s.size(), 0u);
}

// Random operations against std::set. A universe of 300 values over up to a few hundred
// elements keeps the table dense enough that long probe runs form, wrap around the end of the
// table, and get shifted back by erases; every member is checked after every erase.
TEST(HandleSet, MatchesStdSetUnderRandomInsertsAndErases) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    HandleSet s;
    std::set<Handle> model;
    for (int step = 0; step < 4000; ++step) {
      // Pointer-like (Open MPI) and integer-like (MPICH) handles, and 0.
      const Handle base = seed % 2 ? 0x5555'0000'0000ULL : 0x84000000ULL;
      const std::uint64_t r = rng() % 300;
      const Handle h = r == 0 ? 0 : base + 16 * r;
      if (rng() % 3 != 0) {
        ASSERT_EQ(s.insert(h), model.insert(h).second) << "seed " << seed << " step " << step;
      } else {
        ASSERT_EQ(s.erase(h), model.erase(h) == 1) << "seed " << seed << " step " << step;
        for (const Handle m : model) ASSERT_TRUE(s.contains(m)) << "seed " << seed << " step " << step << " lost " << m;
      }
      ASSERT_EQ(s.size(), model.size());
      ASSERT_EQ(s.contains(h), model.count(h) == 1);
    }
    s.clear();
    EXPECT_EQ(s.size(), 0u);
    for (const Handle m : model) EXPECT_FALSE(s.contains(m));
  }
}

}  // namespace
