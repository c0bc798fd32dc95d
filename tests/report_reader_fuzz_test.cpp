// The report reader on bad input (truncated files, wrong types, huge numbers, deep nesting,
// invalid UTF-8, random byte changes): every mutation of a rank report either loads or is a
// ReportError; merging, summarizing and writing SARIF, JUnit and HTML what loaded never throws
// anything else, never crashes and never hangs (ctest's timeout).
#include "merge/load.hpp"
#include "merge/merge.hpp"
#include "tools/report/outputs.hpp"
#include "merge/suppress.hpp"
#include "merge/symbolize.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <unistd.h>

using namespace attrcheck::reports;

namespace {

const char* const kReport = R"({"schema": "attrcheck.rank-report", "version": "1.1",
 "tool": {"name": "attrcheck", "version": "0.1.0"},
 "run": {"rank": 1, "size": 2, "pid": 4242, "mode": "shadow", "status": "finalized", "signal": 0,
         "job": "", "spawned": false},
 "summary": {"error": 1, "warning": 1, "info": 0, "dropped": 0},
 "findings": [
  {"rule": "keyval.double-free", "severity": "error", "message": "MPI_Comm_free_keyval: keyval 12 on 0x55aa",
   "hint": "Free each keyval once.", "call": "MPI_Comm_free_keyval", "rank": 1, "count": 2, "keyval": 12,
   "stack": 1, "site": {"address": "0x55000001040", "offset": "0x1040", "symbol": "main+0x40",
   "module": "/nonexistent/app", "entry": false},
   "provenance": [{"what": "keyval created", "stack": 2}, {"what": "keyval freed", "stack": 1}]},
  {"rule": "attr.leak", "severity": "warning", "message": "attribute 12 on comm 0x1 leaks \u00e9",
   "call": "MPI_Finalize", "rank": 1, "count": 1, "stack": 2,
   "site": {"offset": "0x2000", "module": "/nonexistent/libx.so",
            "python": {"python": true, "file": "/src/app.py", "line": 7, "function": "make"}}}],
 "stacks": [
  {"id": 1, "frames": [{"address": "0x55000001040", "module": "/nonexistent/app", "offset": "0x1040"},
                       {"address": "0x55000001100", "module": "/nonexistent/app", "offset": "0x1100"}]},
  {"id": 2, "frames": [{"address": "0x7f0000002000", "module": "/nonexistent/libx.so", "offset": "0x2000",
                        "function": "lib_init", "file": "/src/x.c", "line": 12, "symbolized": true},
                       {"python": true, "file": "/src/app.py", "line": 7, "function": "make"}]}]}
)";

class Fuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/attrcheck-fuzz-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

  std::string write(const std::string& name, const std::string& body) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << body;
    return path;
  }

  // Everything a user can do with the file: it loads or is a ReportError, and what loads goes
  // through every output.
  void exercise(const std::string& body) {
    std::string path = write("rank-1.json", body);
    write("rank-0.json", kReport);
    try {
      Json data = load(path);
      (void)summary_text(data);
    } catch (const ReportError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path, 0), 0u) << "the error names the file: " << e.what();
    }
    // The merge's quick reading of a rank report (findings by key, stacks when needed) must
    // merge exactly as reading every file whole does.
    std::string quick, whole;
    try {
      quick = dump(merge_files({dir_ + "/rank-0.json", path}));
    } catch (const ReportError& e) {
      quick = std::string("error: ") + e.what();
    }
    try {
      Merger m;
      m.add(dir_ + "/rank-0.json", load(dir_ + "/rank-0.json"));
      m.add(path, load(path));
      whole = dump(m.result());
    } catch (const ReportError& e) {
      whole = std::string("error: ") + e.what();
    }
    bool quick_failed = quick.rfind("error: ", 0) == 0, whole_failed = whole.rfind("error: ", 0) == 0;
    if (quick_failed) {
      EXPECT_TRUE(whole_failed) << "the quick reading refused what the whole one reads: " << quick;
    } else if (whole_failed) {
      // The one difference: a stack no finding uses is not read, so a fault inside one (and only
      // there) goes unnoticed.
      std::smatch m;
      std::size_t stacks = body.find("\"stacks\"");
      ASSERT_TRUE(std::regex_search(whole, m, std::regex(R"(rank-1\.json:(\d+):\d+: not valid JSON)"))) << whole;
      ASSERT_NE(stacks, std::string::npos) << whole;
      auto stacks_line = static_cast<long>(std::count(body.begin(), body.begin() + static_cast<long>(stacks), '\n')) + 1;
      EXPECT_GE(std::stol(m[1]), stacks_line) << "a fault outside the stacks was not noticed: " << whole;
    } else {
      EXPECT_EQ(quick, whole);
    }
    for (bool tolerate : {false, true}) {
      try {
        Json merged = merge_files({dir_ + "/rank-0.json", path}, std::nullopt, 0, tolerate);
        symbolize(merged);
        suppress(merged, {{"attr.*", "fun", "lib_*", "x:1", false}, {"*", "at", "*+0x1040", "x:2", true}});
        (void)summary_text(merged);
        (void)sarif(merged, "0");
        (void)junit(merged);
        (void)html(merged);
        (void)complete(merged);
      } catch (const ReportError& e) {
        EXPECT_FALSE(tolerate) << "a run directory's broken rank is an entry, not an error: " << e.what();
      }
    }
  }

  std::string dir_;
};

TEST_F(Fuzz, TheSampleLoads) {
  Json data = load(write("rank-1.json", kReport));
  EXPECT_EQ(data["findings"].size(), 2u);
  Json merged = merge_files({write("rank-0.json", kReport), dir_ + "/rank-1.json"});
  EXPECT_EQ(merged["findings"][0]["count"], 4);
  EXPECT_EQ(merged["findings"][0]["ranks"], Json::array({1}));
}

TEST_F(Fuzz, EveryTruncationIsAnErrorWithLineAndColumn) {
  std::string text = kReport;
  std::regex where(".*rank-1\\.json:\\d+:\\d+: not valid JSON: .*");
  for (std::size_t n = 0; n + 2 < text.size(); n += 3) {
    std::string path = write("rank-1.json", text.substr(0, n));
    try {
      load(path);
      ADD_FAILURE() << "a report cut at " << n << " bytes loaded";
    } catch (const ReportError& e) {
      EXPECT_TRUE(std::regex_match(std::string(e.what()), where)) << e.what();
    }
    exercise(text.substr(0, n));
  }
}

TEST_F(Fuzz, WrongTypesAnywhere) {
  // Every value of the sample replaced by each other kind of value, one at a time.
  const char* const replacements[] = {"null", "true", "-1", "1.5", "\"x\"", "[]", "{}", "[1, \"a\", null]",
                                      "{\"id\": \"1\"}", "18446744073709551615", "-9223372036854775808"};
  std::string text = kReport;
  std::regex value(R"(: ("[^"]*"|-?[0-9]+|true|false|null))");
  std::vector<std::pair<std::size_t, std::size_t>> spots;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), value); it != std::sregex_iterator(); ++it)
    spots.emplace_back(static_cast<std::size_t>(it->position(1)), static_cast<std::size_t>(it->length(1)));
  ASSERT_GT(spots.size(), 40u);
  for (auto [at, len] : spots)
    for (const char* r : replacements) exercise(text.substr(0, at) + r + text.substr(at + len));
  // Whole containers of the wrong kind.
  for (const char* key : {"\"findings\": [", "\"stacks\": [", "\"frames\": [", "\"provenance\": ["}) {
    std::size_t at = text.find(key) + std::string(key).size() - 1;
    exercise(text.substr(0, at) + "7, " + text.substr(at + 1));
    exercise(text.substr(0, at) + "{\"a\": " + text.substr(at));
  }
}

TEST_F(Fuzz, HugeNumbers) {
  std::string text = kReport;
  for (const char* n : {"1e999", "-1e999", "99999999999999999999999999", "1e308", "-0", "0.0000001"}) {
    for (const char* key : {"\"count\": 2", "\"rank\": 1,", "\"stack\": 1", "\"id\": 1", "\"size\": 2"}) {
      std::string k = key;
      std::size_t at = text.find(k);
      std::size_t colon = k.find(':');
      std::string replaced = text.substr(0, at) + k.substr(0, colon + 2) + n + (k.back() == ',' ? "," : "") +
                             text.substr(at + k.size());
      exercise(replaced);
    }
  }
}

TEST_F(Fuzz, DeepNesting) {
  for (std::size_t depth : {100u, 300u, 100000u}) {
    for (const char* open : {"[", "{\"a\":"}) {
      std::string deep;
      for (std::size_t i = 0; i < depth; ++i) deep += open;
      std::string text = kReport;
      std::size_t at = text.find("\"keyval\": 12") + 10;
      exercise(text.substr(0, at) + deep + text.substr(at + 2));  // unclosed
      std::string closed = deep;
      for (std::size_t i = 0; i < depth; ++i) closed += open[0] == '[' ? "]" : "1}";
      if (open[0] == '{') closed = closed.substr(0, closed.size() - 2 * depth) + "1" + std::string(depth, '}');
      exercise(text.substr(0, at) + closed + text.substr(at + 2));
    }
  }
}

TEST_F(Fuzz, InvalidUtf8) {
  std::string text = kReport;
  for (const char* bad : {"\xff", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\x00"}) {
    std::string b(bad, bad[0] ? std::strlen(bad) : 1);
    for (const char* key : {"keyval 12", "main+0x40", "lib_init", "\"schema\""}) {
      std::size_t at = text.find(key) + 2;
      exercise(text.substr(0, at) + b + text.substr(at));
    }
  }
}

TEST_F(Fuzz, RandomByteChanges) {
  std::mt19937 rng(20261123);
  std::string text = kReport;
  const char alphabet[] = "{}[]\",:0123456789.-eE \\ntrufalsx\xff\x80";
  for (int round = 0; round < 3000; ++round) {
    std::string m = text;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      std::size_t at = rng() % m.size();
      char c = alphabet[rng() % (sizeof alphabet - 1)];
      switch (rng() % 3) {
        case 0: m[at] = c; break;
        case 1: m.insert(m.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: m.erase(at, 1 + rng() % 8);
      }
      if (m.empty()) m = "{";
    }
    exercise(m);
  }
}

TEST_F(Fuzz, JournalsLineByLine) {
  std::string header = R"({"schema": "attrcheck.rank-journal", "version": "1.1", "run": {"rank": 3, "size": 4}})";
  std::string line = R"({"seq": 0, "finding": {"rule": "attr.leak", "severity": "warning", "message": "m", "stack": 1},)"
                     R"( "stacks": [{"id": 1, "frames": [{"module": "/x", "offset": "0x1"}]}]})";
  std::string body = header + "\n" + line + "\n" + line;
  for (std::size_t n = 0; n <= body.size(); n += 5) {
    std::string path = write("rank-3.journal", body.substr(0, n));
    try {
      Json data = load(path);
      EXPECT_EQ(data["run"]["status"], "running");
      (void)summary_text(merge_files({path}));
    } catch (const ReportError& e) {
      EXPECT_LE(n, header.size() + 1) << e.what();  // only a cut header is an error
    }
  }
}

}  // namespace
