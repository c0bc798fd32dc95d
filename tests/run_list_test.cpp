// The run log's growing array (src/runtime/callbacks/run_list.hpp), against std::vector as a model: appends
// past the first block and past each doubling keep every element, emptying keeps the storage for
// the next dup or free, shrinking back drops only the tail.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "runtime/callbacks/run_list.hpp"

namespace {

using attrcheck::rt::RunList;

struct LoggedRun {
  int keyval;
  int rc;
  std::uint64_t value;
};

void expect_same(RunList<LoggedRun>& list, const std::vector<LoggedRun>& model) {
  ASSERT_EQ(list.size(), model.size());
  std::size_t i = 0;
  for (const LoggedRun& r : list) {
    EXPECT_EQ(r.keyval, model[i].keyval) << "element " << i;
    EXPECT_EQ(r.rc, model[i].rc) << "element " << i;
    EXPECT_EQ(r.value, model[i].value) << "element " << i;
    ++i;
  }
  EXPECT_EQ(i, model.size());
}

TEST(RunList, StartsEmpty) {
  RunList<LoggedRun> list;
  EXPECT_EQ(list.size(), 0u);
  EXPECT_EQ(list.begin(), list.end());
}

TEST(RunList, AppendsKeepEveryElementAcrossGrowth) {
  RunList<LoggedRun> list;
  std::vector<LoggedRun> model;
  for (int i = 0; i < 1000; ++i) {  // (past the first 64 and several doublings)
    const LoggedRun r{i, i % 3, 0x1000000000ULL + static_cast<std::uint64_t>(i) * 7};
    if (i % 2) list.append() = r;
    else list.push_back(r);
    model.push_back(r);
  }
  expect_same(list, model);
  EXPECT_EQ(list.data(), list.begin());
}

TEST(RunList, ClearKeepsTheStorageForTheNextLog) {
  RunList<LoggedRun> list;
  for (int i = 0; i < 100; ++i) list.append() = LoggedRun{i, 0, 1};
  const LoggedRun* storage = list.data();
  list.clear();
  EXPECT_EQ(list.size(), 0u);
  std::vector<LoggedRun> model;
  for (int i = 0; i < 100; ++i) {  // (within the capacity kept: no new block)
    list.append() = LoggedRun{-i, 1, 2};
    model.push_back(LoggedRun{-i, 1, 2});
  }
  EXPECT_EQ(list.data(), storage);
  expect_same(list, model);
}

TEST(RunList, ShrinkToDropsOnlyTheTail) {
  RunList<LoggedRun> list;
  std::vector<LoggedRun> model;
  for (int i = 0; i < 70; ++i) {
    list.append() = LoggedRun{i, 0, static_cast<std::uint64_t>(i)};
    model.push_back(LoggedRun{i, 0, static_cast<std::uint64_t>(i)});
  }
  list.shrink_to(65);
  model.resize(65);
  expect_same(list, model);
  list.append() = LoggedRun{7, 7, 7};
  model.push_back(LoggedRun{7, 7, 7});
  expect_same(list, model);
}

}  // namespace
