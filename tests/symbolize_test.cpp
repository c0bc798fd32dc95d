// In-process symbolization (src/report/symbolize.hpp), without MPI: a report's sites and stack
// frames get function, file and line, a return address names the call before it, an entry
// address names its own function, a stripped library's static function gets no name (not the
// exported one before it), and a module with compressed DWARF is named from its symbol table
// (static functions too, no file and line). One test: libbacktrace's view of the modules is set up once per process.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "render_report.hpp"
#include "report/report.hpp"
#include "report/symbolize.hpp"

namespace attrcheck {
namespace {

// A function of this test (with debug information) whose return address is recorded.
__attribute__((noinline)) const void* where_am_i() { return __builtin_return_address(0); }

FindingInput at(const char* call, const void* site, bool entry) {
  FindingInput in;
  in.rule = Rule::KeyvalLeak;
  in.call = call;  // one finding per call
  in.site = site;
  in.site_is_entry = entry;
  return in;
}

const nlohmann::json& site_of(const nlohmann::json& report, const std::string& call) {
  for (const auto& f : report["findings"])
    if (f["call"] == call) return f["site"];
  ADD_FAILURE() << "no finding from " << call;
  static const nlohmann::json none = nlohmann::json::object();
  return none;
}

TEST(Symbolize, NamesSitesAndFramesInProcess) {
  void* lib = dlopen(ATTRCHECK_SYMBOLIZE_FIXTURE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  const char* first = static_cast<const char*>(dlsym(lib, "exported_first"));
  const char* third = static_cast<const char*>(dlsym(lib, "exported_third"));
  using Function = int (*)(int);
  auto hidden_pointer = reinterpret_cast<Function (*)()>(dlsym(lib, "hidden_second_pointer"));
  ASSERT_TRUE(first && third && hidden_pointer);
  const char* hidden = reinterpret_cast<const char*>(hidden_pointer());
  ASSERT_TRUE(first < hidden && hidden < third);  // the layout the case is about

  const ModuleCost cost = module_cost(ATTRCHECK_SYMBOLIZE_FIXTURE);
  EXPECT_TRUE(cost.elf);
  EXPECT_FALSE(cost.dwarf);  // stripped: only .dynsym
  EXPECT_GT(cost.symtab_bytes, 0u);

  // The same code with compressed DWARF and its full symbol table: named from that table.
  void* zlib = dlopen(ATTRCHECK_SYMBOLIZE_FIXTURE_Z, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(zlib, nullptr) << dlerror();
  const char* z_third = static_cast<const char*>(dlsym(zlib, "exported_third"));
  auto z_hidden_pointer = reinterpret_cast<Function (*)()>(dlsym(zlib, "hidden_second_pointer"));
  ASSERT_TRUE(z_third && z_hidden_pointer);
  const ModuleCost z_cost = module_cost(ATTRCHECK_SYMBOLIZE_FIXTURE_Z);
  EXPECT_TRUE(z_cost.dwarf);
  EXPECT_TRUE(z_cost.compressed);

  FindingStore store;
  store.set_stack_depth(4);
  store.record(at("z.hidden.entry", reinterpret_cast<const char*>(z_hidden_pointer()), true));
  store.record(at("z.third.inside", z_third + 8, false));
  store.record(at("z.third.before", z_third, false));  // the byte before its entry: no function's
  const void* here = where_am_i();  // a return address into this test, just after the call
  store.record(at("first.entry", first, true));
  store.record(at("hidden.entry", hidden, true));
  store.record(at("third.entry", third, true));
  store.record(at("third.return", third, false));  // as a return address: the code before it
  store.record(at("third.inside", third + 8, false));
  store.record(at("test.return", here, false));
  // A provenance stack: return addresses into the library, then into this test.
  FindingInput with_stack = at("stack", first, true);
  const void* frames[] = {third + 8, here};
  with_stack.provenance[0] = ProvenanceInput{"keyval created", frames, 2};
  with_stack.provenance_count = 1;
  store.record(with_stack);
  RunInfo run;
  EXPECT_EQ(render(run, store)["findings"][0]["site"].count("symbolized"), 0u);  // not before the pass

  EXPECT_GT(symbolize_findings(store), 0u);
  const nlohmann::json report = render(run, store);
  EXPECT_EQ(report["version"], "1.8");
  EXPECT_EQ(site_of(report, "first.entry").value("function", ""), "exported_first");
  EXPECT_EQ(site_of(report, "third.entry").value("function", ""), "exported_third");
  EXPECT_EQ(site_of(report, "third.inside").value("function", ""), "exported_third");
  // No name is better than the nearest exported one before it.
  EXPECT_EQ(site_of(report, "hidden.entry").value("function", "none"), "none");
  EXPECT_NE(site_of(report, "third.return").value("function", ""), "exported_third");
  for (const char* call : {"first.entry", "hidden.entry", "third.entry", "third.return", "third.inside", "test.return"})
    EXPECT_EQ(site_of(report, call).value("symbolized", false), true) << call;  // attempted, found or not

  // Compressed DWARF: names from the symbol table, the static function's too, and no file.
  EXPECT_EQ(site_of(report, "z.hidden.entry").value("function", ""), "hidden_second");
  EXPECT_EQ(site_of(report, "z.third.inside").value("function", ""), "exported_third");
  for (const char* call : {"z.hidden.entry", "z.third.inside"}) {
    EXPECT_EQ(site_of(report, call).count("file"), 0u) << call;
    EXPECT_EQ(site_of(report, call).value("symbolized", false), true) << call;
  }
  // An address in no function's extent (padding, or another function's last byte) is not named
  // here: left to the offline pass.
  const nlohmann::json& before = site_of(report, "z.third.before");
  EXPECT_NE(before.value("function", ""), "exported_third") << before.dump();

  const nlohmann::json& mine = site_of(report, "test.return");
  EXPECT_NE(mine.value("function", "").find("NamesSitesAndFramesInProcess"), std::string::npos) << mine.dump();
  EXPECT_NE(mine.value("file", "").find("symbolize_test.cpp"), std::string::npos) << mine.dump();
  EXPECT_GT(mine.value("line", 0), 0);

  // The stacks: each frame looked up as a return address.
  nlohmann::json provenance;
  for (const auto& f : report["findings"])
    if (f["call"] == "stack") {
      for (const auto& s : report["stacks"])
        if (s["id"] == f["provenance"][0]["stack"]) provenance = s["frames"];
    }
  ASSERT_EQ(provenance.size(), 2u) << report.dump();
  EXPECT_EQ(provenance[0].value("function", ""), "exported_third");
  EXPECT_EQ(provenance[0].count("file"), 0u);  // no debug information in the library
  EXPECT_EQ(provenance[1].value("function", ""), mine.value("function", "?"));
  EXPECT_EQ(provenance[1].value("line", 0), mine.value("line", -1));
  EXPECT_EQ(provenance[1].value("symbolized", false), true);

  // Once per process: a second pass changes nothing.
  EXPECT_EQ(symbolize_findings(store), 0u);
}

TEST(Symbolize, LibcDebugInformationIsCompressed) {
  // Debian's separate debug files are compressed (libc6-dbg, if installed, is libc's).
  const ModuleCost libc = module_cost("/lib/x86_64-linux-gnu/libc.so.6");
  if (!libc.elf) GTEST_SKIP() << "no /lib/x86_64-linux-gnu/libc.so.6";
  if (libc.debug_file.empty()) GTEST_SKIP() << "libc has no separate debug file here (libc6-dbg)";
  EXPECT_TRUE(libc.dwarf);
  EXPECT_TRUE(libc.compressed) << libc.debug_file;
}

}  // namespace
}  // namespace attrcheck
