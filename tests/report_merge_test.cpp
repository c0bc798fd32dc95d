// The merge (merge/merge.hpp) as the job's gather at MPI_Finalize uses it: a tree of
// merges (k-nomial, as the gather's, and binomial), each merging its children's merged reports, must give what one merge of every rank's
// report gives; past the cap of distinct findings, the findings kept and the counts are the same
// too; a rank report added after a gathered report that holds its findings adds only what came
// after; runs of ranks are written as [first, last].
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "merge/merge.hpp"

using attrcheck::reports::Json;
using attrcheck::reports::Merger;

namespace {

// Rank `rank` of a job of `size`: findings on every rank (the same site, with a rank-specific
// address in the message), on every third rank, and on this rank alone; a stack per finding.
Json rank_report(int rank, int size, int distinct_per_rank) {
  Json stacks = Json::array();
  auto frame = [](const char* module, int offset) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%x", offset);
    return Json{{"address", hex}, {"module", module}, {"offset", hex}};
  };
  auto finding = [&](const std::string& rule, const std::string& severity, int offset, const std::string& message,
                     int count) {
    const int id = static_cast<int>(stacks.size()) + 1;
    stacks.push_back(Json{{"id", id}, {"frames", Json::array({frame("/app", offset), frame("/libc.so", 0x27000)})}});
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%x", offset);
    return Json{{"rule", rule},   {"severity", severity}, {"message", message}, {"hint", ""},
                {"call", "MPI_Comm_free_keyval"}, {"rank", rank}, {"count", count}, {"keyval", 10 + rank},
                {"stack", id},    {"site", {{"address", hex}, {"offset", hex}, {"symbol", ""}, {"module", "/app"}}}};
  };
  Json findings = Json::array();
  char msg[128];
  std::snprintf(msg, sizeof msg, "keyval 13 is freed a second time (comm 0x%x)", 0x5000 + rank);
  findings.push_back(finding("keyval.double-free", "error", 0x1100, msg, 1 + rank % 2));
  if (rank % 3 == 0) findings.push_back(finding("attr.leak", "warning", 0x1200, "attribute 13 leaks", 2));
  for (int k = 0; k < distinct_per_rank; ++k) {
    std::snprintf(msg, sizeof msg, "keyval %d was never freed", 1000 * rank + k);
    findings.push_back(finding("keyval.leak", k % 2 ? "warning" : "info", 0x2000 + 16 * k, msg, 1));
  }
  Json intercepted = {{"keyval", {{"c", 3}, {"fortran", 0}, {"f08", 0}}},
                      {"attribute", {{"c", rank}, {"fortran", 0}, {"f08", 0}}},
                      {"object", {{"c", 1}, {"fortran", 0}, {"f08", 0}}},
                      {"callback", {{"c", 0}, {"fortran", 0}, {"f08", 0}}}};
  return Json{{"schema", "attrcheck.rank-report"},
              {"version", "1.6"},
              {"run", {{"rank", rank}, {"size", size}, {"pid", 100 + rank}, {"job", ""}, {"spawned", false},
                       {"mode", "shadow"}, {"status", "finalized"}, {"signal", 0}}},
              {"intercepted", intercepted},
              {"findings", findings},
              {"stacks", stacks}};
}

// What the gather does: each rank of a k-nomial tree (fan-in k; 2: binomial) merges its own report
// with its children's merged ones and hands the result up.
Json tree_merge(int size, int distinct, std::size_t cap, int k = 8) {
  std::function<Json(int)> subtree = [&](int rank) {
    Merger m(cap);
    m.mark_gathered();
    m.add("gathered", rank_report(rank, size, distinct));
    for (long step = 1; step < size; step *= k) {
      if ((rank / step) % k != 0) break;
      for (long d = 1; d < k; ++d)
        if (rank + d * step < size) m.add("gathered", subtree(static_cast<int>(rank + d * step)));
    }
    return m.result();
  };
  return subtree(0);
}

Json flat_merge(int size, int distinct, std::size_t cap) {
  Merger m(cap);
  for (int r = 0; r < size; ++r) m.add("rank-" + std::to_string(r) + ".json", rank_report(r, size, distinct));
  return m.result();
}

// What both must agree on: everything but the table of ranks (a gathered job's entries stand for
// runs of ranks, a file merge's for one rank and its file each) and the upper bounds in "more".
void expect_same(Json tree, Json flat) {
  for (Json* j : {&tree, &flat}) {
    j->erase("ranks");
    if (j->contains("more")) {
      (*j)["more"].erase("findings");
      (*j)["more"].erase("sites");
    }
  }
  EXPECT_EQ(tree.dump(1), flat.dump(1));
}

TEST(MergeTree, GivesWhatOneMergeOfEveryRankGives) {
  for (int size : {1, 2, 3, 7, 16, 37, 70}) {
    SCOPED_TRACE(size);
    expect_same(tree_merge(size, 3, 0), flat_merge(size, 3, 0));
    expect_same(tree_merge(size, 3, 0, 2), flat_merge(size, 3, 0));
  }
}

TEST(MergeTree, PastTheCapKeepsTheSameFindingsAndExactCounts) {
  const int size = 23, distinct = 9;
  const std::size_t cap = 12;
  Json tree = tree_merge(size, distinct, cap), flat = flat_merge(size, distinct, cap);
  ASSERT_EQ(flat["findings"].size(), cap);
  expect_same(tree, flat);
  expect_same(tree_merge(size, distinct, cap, 2), flat);
  // Exact in one merge: every finding not kept is counted once, with its site.
  const std::size_t all = 2 + static_cast<std::size_t>(size * distinct);
  EXPECT_EQ(flat["more"]["findings"], all - cap);
  EXPECT_EQ(flat["more"]["sites"], distinct);  // the leaks' sites (the kept errors and warnings are others)
  // Upper bounds in the tree, never less.
  EXPECT_GE(tree["more"]["findings"].get<std::int64_t>(), flat["more"]["findings"].get<std::int64_t>());
  EXPECT_GE(tree["more"]["sites"].get<std::int64_t>(), flat["more"]["sites"].get<std::int64_t>());
  // Errors and warnings come first: every error is kept.
  std::int64_t errors = 0;
  for (const Json& f : flat["findings"])
    if (f["severity"] == "error") errors += f["count"].get<std::int64_t>();
  EXPECT_EQ(errors, flat["summary"]["error"]);
}

TEST(MergeTree, RunsOfRanksAreWrittenAsFirstAndLast) {
  Json tree = tree_merge(37, 0, 0);
  const Json* everywhere = nullptr;
  for (const Json& f : tree["findings"])
    if (f["rule"] == "keyval.double-free") everywhere = &f;
  ASSERT_NE(everywhere, nullptr);
  EXPECT_EQ((*everywhere)["ranks"], Json::parse("[[0, 36]]"));
  ASSERT_EQ(tree["ranks"].size(), 1u);
  EXPECT_EQ(tree["ranks"][0]["ranks"], Json::parse("[[0, 36]]"));
  EXPECT_EQ(tree["ranks"][0]["gathered"], true);
  EXPECT_EQ(attrcheck::reports::ranks_in_entry(tree["ranks"][0]), 37);
  EXPECT_TRUE(attrcheck::reports::complete(tree));
  // The text kept is the lowest rank's, whatever order the merge saw them in.
  EXPECT_EQ((*everywhere)["message"], "keyval 13 is freed a second time (comm 0x5000)");
  EXPECT_EQ((*everywhere)["keyval"], 10);
  const Json* third = nullptr;
  for (const Json& f : tree["findings"])
    if (f["rule"] == "attr.leak") third = &f;
  ASSERT_NE(third, nullptr);
  EXPECT_EQ((*third)["ranks"], Json::parse("[0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36]"));
}

TEST(MergeTree, ARankReportAfterTheGatheredOneAddsOnlyWhatCameAfter) {
  Json gathered = tree_merge(4, 0, 0);
  gathered["gathered"] = {{"pid", 100}};
  // Rank 2 found its double free once more after the gather, and a new finding.
  Json late = rank_report(2, 4, 0);
  late["findings"][0]["count"] = 1 + 1;  // the gathered report holds 1 (rank 2: 1 + 2 % 2)
  late["findings"][0]["gathered_count"] = 1;
  late["findings"].push_back(late["findings"][0]);
  late["findings"][1]["rule"] = "callback.error";
  late["findings"][1].erase("gathered_count");
  late["findings"][1]["count"] = 3;
  // Rank 5 is not in the gathered report: all of its findings count.
  Json other = rank_report(5, 4, 0);
  other["findings"][0]["gathered_count"] = 2;
  Merger m;
  m.add("report.json", gathered);
  m.add("rank-2.json", late);
  m.add("rank-5.json", other);
  Json out = m.result();
  std::map<std::string, std::int64_t> counts;
  for (const Json& f : out["findings"]) counts[f["rule"].get<std::string>()] = f["count"].get<std::int64_t>();
  // Gathered: 1 + 2 + 1 + 2; rank 2's one more; rank 5's 2 (1 + 5 % 2).
  EXPECT_EQ(counts["keyval.double-free"], 6 + 1 + 2);
  EXPECT_EQ(counts["callback.error"], 3);
  EXPECT_EQ(out["summary"]["error"], 9 + 3);
  // Rank 2 is one rank still: its later report ended as the gathered one says (finalized).
  EXPECT_EQ(attrcheck::reports::ranks_in_entry(out["ranks"][0]), 4);
  for (const Json& r : out["ranks"]) EXPECT_FALSE(r.contains("after_gathered")) << r.dump();
}

TEST(MergeTree, AMergedReportMergesAgainWithItsSuppressedFindings) {
  Json merged = flat_merge(3, 1, 0);
  Json once = merged;
  // What suppress() makes of a finding: the whole finding, in "suppressed".
  Json supp = merged["findings"][0];
  supp["suppression"] = "x.supp:1";
  merged["suppressed"] = Json::array({supp});
  merged["findings"].erase(merged["findings"].begin());
  Merger m;
  m.add("report.json", merged);
  Json again = m.result();
  once.erase("ranks");
  again.erase("ranks");
  EXPECT_EQ(again.dump(1), once.dump(1));
}

}  // namespace
