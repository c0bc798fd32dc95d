// The findings store and the per-rank report writer, without MPI.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "render_report.hpp"
#include "report/maps.hpp"
#include "report/python_frames.hpp"
#include "report/report.hpp"

namespace attrcheck {
namespace {

FindingInput input(Rule rule, const void* site, int keyval = -1, const char* detail = nullptr) {
  FindingInput in;
  in.rule = rule;
  in.call = "MPI_Comm_set_attr";
  in.site = site;
  in.site_symbol = "main+0x10";
  if (keyval >= 0) {
    in.has_keyval = true;
    in.keyval = keyval;
  }
  in.detail = detail;
  return in;
}

TEST(Findings, SameRuleSiteAndKeyvalIsOneFindingWithACount) {
  FindingStore store;
  int site;
  for (int i = 0; i < 3; ++i) store.record(input(Rule::KeyvalFreed, &site, 12));
  ASSERT_EQ(store.size(), 1u);
  EXPECT_EQ(store.at(0).count.load(), 3u);
}

TEST(Findings, DifferentKeyvalsAtOneSiteAreDifferentFindings) {
  FindingStore store;  // e.g. two keyvals leaked, both reported at MPI_Finalize
  int site;
  store.record(input(Rule::KeyvalLeak, &site, 12));
  store.record(input(Rule::KeyvalLeak, &site, 13));
  ASSERT_EQ(store.size(), 2u);
  EXPECT_EQ(store.at(1).keyval, 13);
}

TEST(Findings, DifferentDetailOrSiteAreDifferentFindings) {
  FindingStore store;
  int a, b;
  store.record(input(Rule::DeprecatedConstant, &a, -1, "MPI_NULL_COPY_FN"));
  store.record(input(Rule::DeprecatedConstant, &a, -1, "MPI_NULL_DELETE_FN"));
  store.record(input(Rule::DeprecatedConstant, &b, -1, "MPI_NULL_COPY_FN"));
  EXPECT_EQ(store.size(), 3u);
}

// Two different objects at one site (a helper that frees whatever it is given) are two findings,
// each with its own message; the same object again is counted. Handle values (hex) are not part
// of the identity, so a loop failing on many anonymous handles stays one finding.
TEST(Findings, DifferentMessagesAtOneSiteAreDifferentFindings) {
  FindingStore store;
  int site;
  auto freeing = [&](const char* name, Handle h) {
    FindingInput in = input(Rule::ObjectInvalid, &site, -1, "predefined and cannot be freed");
    in.call = "MPI_Comm_free";
    in.has_object = true;
    in.object = h;
    in.object_name = name;
    return in;
  };
  store.record(freeing("MPI_COMM_WORLD", 1));
  store.record(freeing("MPI_COMM_SELF", 2));
  store.record(freeing("MPI_COMM_WORLD", 1));
  ASSERT_EQ(store.size(), 2u);
  EXPECT_STREQ(store.at(0).message, "MPI_Comm_free: MPI_COMM_WORLD is predefined and cannot be freed");
  EXPECT_STREQ(store.at(1).message, "MPI_Comm_free: MPI_COMM_SELF is predefined and cannot be freed");
  EXPECT_EQ(store.at(0).count.load(), 2u);
  EXPECT_EQ(store.at(1).count.load(), 1u);

  FindingStore anonymous;
  for (Handle h = 0x1000; h < 0x1010; ++h) anonymous.record(freeing(nullptr, h));
  ASSERT_EQ(anonymous.size(), 1u);
  EXPECT_EQ(anonymous.at(0).count.load(), 16u);
}

TEST(Findings, MessageAndHintComeFromTheRuleTemplate) {
  FindingStore store;
  int site;
  FindingInput in = input(Rule::DeprecatedCall, &site);
  in.call = "MPI_Attr_put";
  in.replacement = "MPI_Comm_set_attr";
  store.record(in);
  EXPECT_STREQ(store.at(0).message, "MPI_Attr_put is deprecated");
  EXPECT_STREQ(store.at(0).hint, "Use MPI_Comm_set_attr.");
}

TEST(Findings, CountsBySeverityAndGating) {
  FindingStore store;
  int site;
  store.record(input(Rule::DeprecatedCall, &site));  // warning
  EXPECT_FALSE(store.any_at_or_above(0));
  EXPECT_TRUE(store.any_at_or_above(1));
  store.record(input(Rule::KeyvalDoubleFree, &site, 3));  // error
  std::uint64_t c[3];
  store.counts(c);
  EXPECT_EQ(c[0], 1u);
  EXPECT_EQ(c[1], 1u);
  EXPECT_TRUE(store.any_at_or_above(0));
  EXPECT_FALSE(store.any_at_or_above(-1));  // never
}

TEST(Findings, FullStoreDropsAndCounts) {
  FindingStore store;
  static char sites[FindingStore::kCapacity + 5];
  for (auto& s : sites) store.record(input(Rule::KeyvalUnknown, &s, 1));
  EXPECT_EQ(store.size(), FindingStore::kCapacity);
  EXPECT_EQ(store.dropped(), 5u);
}

TEST(Report, RendersValidJsonWithEscapedText) {
  FindingStore store;
  RunInfo run;
  run.rank = 3;
  int site;
  FindingInput in = input(Rule::CallbackError, &site, 7, "callback \"quoted\\\" \n\t\x01 returned 5");
  store.record(in);
  const nlohmann::json j = render(run, store);
  EXPECT_EQ(j["schema"], kReportSchema);
  EXPECT_EQ(j["version"], kReportVersion);
  EXPECT_EQ(j["run"]["rank"], 3);
  EXPECT_EQ(j["run"]["status"], "running");
  EXPECT_EQ(j["summary"]["error"], 1);
  ASSERT_EQ(j["findings"].size(), 1u);
  const auto& f = j["findings"][0];
  EXPECT_EQ(f["rule"], "callback.error");
  EXPECT_EQ(f["severity"], "error");
  EXPECT_EQ(f["message"], "callback \"quoted\\\" \n\t\x01 returned 5");
  EXPECT_EQ(f["keyval"], 7);
  EXPECT_EQ(f["count"], 1);
  EXPECT_EQ(f["site"]["symbol"], "main+0x10");
}

// Seven provenance stacks in libc, some of them prefixes of others.
std::vector<std::vector<const void*>> seven_stacks() {
  const void* libc[] = {dlsym(RTLD_DEFAULT, "strlen"), dlsym(RTLD_DEFAULT, "memcpy"), dlsym(RTLD_DEFAULT, "memmove"),
                        dlsym(RTLD_DEFAULT, "qsort")};
  for (const void* p : libc) EXPECT_NE(p, nullptr);
  std::vector<std::vector<const void*>> stacks;
  for (int depth = 1; depth <= 4; ++depth) stacks.push_back(std::vector<const void*>(libc, libc + depth));
  for (int start = 1; start < 4; ++start) stacks.push_back(std::vector<const void*>(libc + start, libc + 4));
  return stacks;
}

// The report's stack depot, id -> frames' addresses, checked: each id written once, no two
// stacks alike, every stack a finding names present, and a stack's id the position (in the order
// findings and their stacks are written) of its first occurrence.
std::map<int, std::vector<std::string>> checked_depot(const nlohmann::json& j) {
  std::map<int, std::vector<std::string>> depot;
  for (const nlohmann::json& s : j["stacks"]) {
    std::vector<std::string> frames;
    for (const nlohmann::json& f : s["frames"]) frames.push_back(f["address"].get<std::string>());
    EXPECT_TRUE(depot.emplace(s["id"].get<int>(), frames).second) << "stack " << s["id"] << " written twice";
  }
  std::set<std::vector<std::string>> distinct;
  for (const auto& [id, frames] : depot) EXPECT_TRUE(distinct.insert(frames).second) << "stack " << id << " is a copy";
  int position = 0;
  std::set<int> seen;
  for (std::size_t i = 0; i < j["findings"].size(); ++i) {
    const nlohmann::json& f = j["findings"][i];
    std::vector<int> ids;
    if (f.contains("stack")) ids.push_back(f["stack"].get<int>());
    for (const nlohmann::json& p : f.value("provenance", nlohmann::json::array()))
      if (p.contains("stack")) ids.push_back(p["stack"].get<int>());
    for (const int id : ids) {
      ++position;
      EXPECT_TRUE(depot.count(id)) << "finding " << i << " names stack " << id << ", not in the depot";
      if (seen.insert(id).second) {
        EXPECT_EQ(id, position) << "first occurrence of stack " << id;
      }
    }
  }
  return depot;
}

TEST(Report, EachDistinctStackIsWrittenOnceUnderItsFirstPosition) {
  // 300 findings (distinct keyvals, one call site: one own stack), each with one of 7 provenance
  // stacks: the depot holds 8 stacks, and findings with the same provenance name the same one.
  const std::vector<std::vector<const void*>> stacks = seven_stacks();
  FindingStore store;
  int site;
  for (int i = 0; i < 300; ++i) {
    FindingInput in = input(Rule::KeyvalLeak, &site, i);
    const std::vector<const void*>& frames = stacks[(i * 5) % stacks.size()];
    in.provenance[0] = ProvenanceInput{"keyval created", frames.data(), static_cast<int>(frames.size())};
    in.provenance_count = 1;
    store.record(in);
  }
  ASSERT_EQ(store.size(), 300u);
  const nlohmann::json j = render(RunInfo{}, store);
  std::map<int, std::vector<std::string>> depot = checked_depot(j);
  EXPECT_EQ(depot.size(), 1 + stacks.size());
  std::map<int, int> provenance_of;  // stacks index -> id
  for (std::size_t i = 0; i < j["findings"].size(); ++i) {
    const int which = static_cast<int>((i * 5) % stacks.size());
    const int id = j["findings"][i]["provenance"][0]["stack"].get<int>();
    EXPECT_EQ(depot[id].size(), stacks[which].size());
    EXPECT_EQ(provenance_of.emplace(which, id).first->second, id) << "finding " << i;
  }
}

TEST(Report, ThreadsRecordingAtOnceLeaveOneConsistentDepot) {
  // 6 threads record 100 findings each (twice: counted), with the 7 provenance stacks, while
  // another writes the report again and again: every report it writes is consistent, and so is
  // the last.
  const std::vector<std::vector<const void*>> stacks = seven_stacks();
  FindingStore store;
  static int sites[6];
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) checked_depot(render(RunInfo{}, store));
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 6; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        FindingInput in = input(Rule::KeyvalLeak, &sites[t], t * 100 + i);
        const std::vector<const void*>& frames = stacks[(t + i) % stacks.size()];
        in.provenance[0] = ProvenanceInput{"keyval created", frames.data(), static_cast<int>(frames.size())};
        in.provenance_count = 1;
        store.record(in);
        store.record(in);
      }
    });
  for (std::thread& w : writers) w.join();
  done.store(true);
  reader.join();
  ASSERT_EQ(store.size(), 600u);
  EXPECT_EQ(store.dropped(), 0u);
  for (std::size_t i = 0; i < store.size(); ++i) EXPECT_EQ(store.at(i).count.load(), 2u);
  const std::map<int, std::vector<std::string>> depot = checked_depot(render(RunInfo{}, store));
  EXPECT_GE(depot.size(), 1 + stacks.size());  // the 7, and each thread's own stack (alike or not)
  EXPECT_LE(depot.size(), 6 + stacks.size());
}

TEST(PythonFrames, AreFramesOfTheirOwnAndPartOfAFindingsIdentity) {
  // Two calls from two Python lines reach MPI from the same native site (the extension module):
  // two findings, each with its Python frames in its stack, innermost first, and its site's.
  const std::uint32_t line12 = python_frame_add("/home/u/app.py", "make_keyval", 12);
  const std::uint32_t line30 = python_frame_add("/home/u/app.py", "<module>", 30);
  const std::uint32_t line31 = python_frame_add("/home/u/app.py", "<module>", 31);
  void* first[] = {python_frame_word(line12), python_frame_word(line30)};
  void* second[] = {python_frame_word(line31)};
  FindingStore store;
  int site;
  FindingInput in = input(Rule::KeyvalDoubleFree, &site, 3);
  in.python_frames = first;
  in.python_depth = 2;
  store.record(in);
  store.record(in);  // the same Python line again: counted
  in.python_frames = second;
  in.python_depth = 1;
  store.record(in);
  ASSERT_EQ(store.size(), 2u);
  EXPECT_EQ(store.at(0).count.load(), 2u);
  const nlohmann::json j = render(RunInfo{}, store);
  ASSERT_EQ(j["findings"].size(), 2u);
  const nlohmann::json& site12 = j["findings"][0]["site"]["python"];
  EXPECT_EQ(site12, (nlohmann::json{{"python", true}, {"file", "/home/u/app.py"}, {"line", 12}, {"function", "make_keyval"}}));
  EXPECT_EQ(j["findings"][1]["site"]["python"]["line"], 31);
  // The stack: no native frame of the interpreter was captured here (this test has none), so the
  // Python frames follow the native ones, in order.
  std::vector<int> lines;
  for (const nlohmann::json& s : j["stacks"])
    if (s["id"] == j["findings"][0]["stack"])
      for (const nlohmann::json& f : s["frames"])
        if (f.value("python", false)) {
          EXPECT_FALSE(f.contains("module"));
          lines.push_back(f["line"]);
        }
  EXPECT_EQ(lines, (std::vector<int>{12, 30}));
}

TEST(PythonFrames, GoBeforeTheInterpretersFirstNativeFrame) {
  static char interpreter[64], extension[8], libc[8];
  set_python_interpreter_range(interpreter, interpreter + sizeof interpreter);
  void* native[] = {extension, interpreter + 8, interpreter + 16, libc};
  void* python[] = {python_frame_word(1), python_frame_word(2)};
  void* out[8];
  ASSERT_EQ(merge_python_frames(native, 4, python, 2, out, 8), 6);
  EXPECT_EQ(out[0], static_cast<void*>(extension));
  EXPECT_EQ(out[1], python[0]);
  EXPECT_EQ(out[2], python[1]);
  EXPECT_EQ(out[3], static_cast<void*>(interpreter + 8));
  EXPECT_EQ(out[5], static_cast<void*>(libc));
  EXPECT_EQ(merge_python_frames(native, 4, python, 2, out, 3), 3);  // (truncated, in order)
  EXPECT_EQ(out[2], python[1]);
  set_python_interpreter_range(nullptr, nullptr);
}

TEST(Report, EmptyReportIsValid) {
  FindingStore store;
  RunInfo run;
  const nlohmann::json j = render(run, store);
  EXPECT_TRUE(j["findings"].empty());
}

// A journal (what a SIGKILLed rank leaves) starts with the same run identity as its report, so
// the merge puts the rank in its job; then one line per finding.
TEST(Journal, HeaderNamesTheRunAndItsJobAndFindingsFollow) {
  char dir[] = "/tmp/attrcheck-journal-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/job-77-rank-1.journal";
  RunInfo run;
  run.rank = 1;
  run.size = 2;
  run.spawned = true;
  std::snprintf(run.job, sizeof run.job, "77");
  FindingStore store;
  int site;
  store.record(input(Rule::KeyvalLeak, &site, 5, "before the journal"));
  Journal journal;
  ASSERT_TRUE(journal.start(path.c_str(), run, store, true));
  store.record(input(Rule::KeyvalFreed, &site, 6, "after it started"));
  std::ifstream in(path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const nlohmann::json header = nlohmann::json::parse(line);
  EXPECT_EQ(header["run"]["rank"], 1);
  EXPECT_EQ(header["run"]["job"], "77");
  EXPECT_EQ(header["run"]["spawned"], true);
  int findings = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    EXPECT_NO_THROW(nlohmann::json::parse(line)) << line;
    ++findings;
  }
  EXPECT_EQ(findings, 2);
  journal.finish(store);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);  // a report holds everything now: the journal goes
  ::rmdir(dir);
}

// The job the user started keeps rank-N.json; a spawned job's ranks (world ranks from 0 again)
// are named by their job, or by their pid when the process manager gives no job identity.
// The signal path's module lookup agrees with dladdr's (path made absolute, offset from its base)
// for code in this program and in a shared library, and skips memory that is no file's.
TEST(StackModules, EveryFrameOfAModuleSeenBeforeIsPlacedAsDladdrPlacesIt) {
  // Frames in libc, libstdc++ and libm, and one in no module, in three findings' provenance: the
  // first meets each module, the others find it again. Every frame's module and offset are
  // dladdr's (the path made absolute).
  const void* frames[] = {dlsym(RTLD_DEFAULT, "strlen"), reinterpret_cast<const void*>(&std::terminate),
                          dlsym(RTLD_DEFAULT, "cos"), dlsym(RTLD_DEFAULT, "memcpy"), &frames};
  FindingStore store;
  int site;
  for (int i = 0; i < 3; ++i) {
    FindingInput in = input(Rule::KeyvalLeak, &site, i);
    in.provenance[0] = ProvenanceInput{"keyval created", frames + (i == 1 ? 1 : 0), i == 1 ? 4 : 5};
    in.provenance_count = 1;
    store.record(in);
  }
  const nlohmann::json j = render(RunInfo{}, store);
  int checked = 0;
  for (const nlohmann::json& s : j["stacks"]) {
    for (const nlohmann::json& f : s["frames"]) {
      const void* address = reinterpret_cast<const void*>(std::stoull(f["address"].get<std::string>(), nullptr, 16));
      if (std::find(std::begin(frames), std::end(frames), address) == std::end(frames)) continue;  // (the test's own)
      Dl_info dl{};
      if (!dladdr(address, &dl) || !dl.dli_fname) {
        EXPECT_EQ(f["module"], "") << "a frame in no module";
        ++checked;
        continue;
      }
      char real[PATH_MAX];  // (a relative name made absolute)
      ASSERT_NE(realpath(dl.dli_fname, real), nullptr) << dl.dli_fname;
      EXPECT_EQ(f["module"].get<std::string>(), dl.dli_fname[0] == '/' ? dl.dli_fname : real);
      EXPECT_EQ(std::stoull(f["offset"].get<std::string>(), nullptr, 16),
                static_cast<std::uint64_t>(static_cast<const char*>(address) - static_cast<const char*>(dl.dli_fbase)));
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 + 4);  // two distinct provenance stacks
}

TEST(SignalSafeModules, AgreeWithDladdr) {
  const void* addresses[] = {reinterpret_cast<const void*>(&input), reinterpret_cast<const void*>(&std::fflush),
                             reinterpret_cast<const void*>(&std::terminate), static_cast<const void*>(&addresses)};
  struct Found {
    std::string path[4];
    std::uint64_t offset[4] = {};
    int calls = 0;
  } found;
  modules_from_maps(addresses, 4, [](void* c, int i, const char* path, std::uint64_t offset) {
    auto* f = static_cast<Found*>(c);
    f->path[i] = path;
    f->offset[i] = offset;
    ++f->calls;
  }, &found);
  EXPECT_EQ(found.calls, 3);  // not the stack variable
  for (int i = 0; i < 3; ++i) {
    Dl_info dl{};
    ASSERT_TRUE(dladdr(addresses[i], &dl) && dl.dli_fname) << i;
    char real[PATH_MAX];
    ASSERT_NE(realpath(dl.dli_fname, real), nullptr) << dl.dli_fname;
    char mapped[PATH_MAX];
    ASSERT_NE(realpath(found.path[i].c_str(), mapped), nullptr) << found.path[i];
    EXPECT_STREQ(mapped, real) << i;
    EXPECT_EQ(found.offset[i], static_cast<std::uint64_t>(static_cast<const char*>(addresses[i]) -
                                                          static_cast<const char*>(dl.dli_fbase)))
        << i << " " << found.path[i];
  }
}

TEST(ReportFile, SpawnedJobsAreNamedByJob) {
  RunInfo run;
  run.rank = 3;
  run.pid = 4242;
  char name[160];
  report_file_name(run, name, sizeof name);
  EXPECT_STREQ(name, "rank-3.json");
  run.spawned = true;
  report_file_name(run, name, sizeof name);
  EXPECT_STREQ(name, "job-pid4242-rank-3.json");

  ::unsetenv("OMPI_MCA_ess_base_jobid");
  ::setenv("PMIX_NAMESPACE", "prterun-vm-1234@2/x y", 1);  // Open MPI 5 style, with junk
  find_job_identity(run.job, sizeof run.job);
  EXPECT_STREQ(run.job, "prterun-vm-1234_2_x_y");
  report_file_name(run, name, sizeof name);
  EXPECT_STREQ(name, "job-prterun-vm-1234_2_x_y-rank-3.json");
  ::unsetenv("PMIX_NAMESPACE");
  ::setenv("OMPI_MCA_ess_base_jobid", "1105002498", 1);
  find_job_identity(run.job, sizeof run.job);
  EXPECT_STREQ(run.job, "1105002498");
  ::unsetenv("OMPI_MCA_ess_base_jobid");
  find_job_identity(run.job, sizeof run.job);
  EXPECT_STREQ(run.job, "");
}

TEST(ReportFile, WritesAtomicallyAndNeverThroughASymlink) {
  char dir[] = "/tmp/attrcheck-reportfile-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string victim = std::string(dir) + "/victim";
  { std::ofstream(victim) << "precious"; }
  const std::string target = std::string(dir) + "/out/rank-0.json";
  ReportFile file;
  char error[256];
  ASSERT_TRUE(file.prepare((std::string(dir) + "/out").c_str(), "rank-0.json", error, sizeof error)) << error;
  ASSERT_EQ(symlink(victim.c_str(), target.c_str()), 0);
  FindingStore store;
  RunInfo run;
  ASSERT_TRUE(file.write(run, store));
  std::ifstream v(victim);
  std::string content((std::istreambuf_iterator<char>(v)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "precious");
  char link[16];
  EXPECT_EQ(readlink(target.c_str(), link, sizeof link), -1);  // replaced by a regular file
  std::ifstream r(target);
  EXPECT_NO_THROW(nlohmann::json::parse(r));
  std::system((std::string("rm -rf ") + dir).c_str());
}

TEST(ReportFile, UnusableDirectoryIsAClearError) {
  ReportFile file;
  char error[256] = "";
  EXPECT_FALSE(file.prepare("/proc/attrcheck-cannot-be-here", "rank-0.json", error, sizeof error));
  EXPECT_NE(std::string(error).find("/proc/attrcheck-cannot-be-here"), std::string::npos) << error;
  EXPECT_FALSE(file.ready());
}

}  // namespace
}  // namespace attrcheck
