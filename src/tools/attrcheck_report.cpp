// attrcheck-report: read, merge, gate and convert attrcheck reports (see usage below).
#include "merge/load.hpp"
#include "merge/merge.hpp"
#include "tools/report/outputs.hpp"
#include "merge/symbolize.hpp"
#include "merge/suppress.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fnmatch.h>
#include <iostream>

using namespace attrcheck::reports;

namespace {

constexpr const char* kToolVersion = ATTRCHECK_VERSION;

constexpr const char* kUsage = R"(attrcheck-report: read, merge, gate and convert attrcheck reports.

usage:
  attrcheck-report summary REPORT...                  a table: rule, severity, count, ranks, where
  attrcheck-report merge DIR|FILE... -o OUT [--force]  per-rank reports (or merged ones) into one
  attrcheck-report gate REPORT... [--fail-on SEVERITY] [--rule GLOB]...
                                                      exit 1 if such findings exist (for CI)
  attrcheck-report sarif REPORT... -o OUT.sarif [--force]
                                                      SARIF 2.1.0, results at source file and line
  attrcheck-report junit REPORT... -o OUT.xml [--force]
                                                      JUnit XML: one test case per rule
  attrcheck-report html REPORT... -o OUT.html [--force]
                                                      one self-contained page to review findings:
                                                      filter by rule, severity and rank, expand
                                                      stacks and provenance)";

constexpr const char* kEpilog = R"(REPORT is a per-rank report (rank-N.json), a merged report (report.json), or a run directory
(its per-rank reports are merged). Several are merged first. --suppressions FILE (before the
command) leaves out matching findings, keeping their counts as 'suppressed'; the default
suppressions shipped with attrcheck (lib/attrcheck/default.supp) apply too, unless
--no-default-suppressions is given. --fail-on: error (default), warning, info. Nothing is
overwritten unless --force is given.

exit status: 0 ok (gate: nothing at or above the threshold), 1 gate failed, 2 bad usage or
bad input (the message names the file, and the line and column for malformed JSON).)";

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "attrcheck-report: error: %s\n", message.c_str());
  std::exit(2);
}

struct Inputs {
  std::vector<std::string> reports;
  std::string output;
  bool force = false;
  std::string fail_on = "error";
  std::vector<std::string> rules;
};

std::vector<Suppression> g_suppressions;

// Loads reports (files or run directories), merges them into one merged report, and applies the
// suppressions (which need symbolized frames).
Json load_inputs(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const auto& path : paths) {
    if (is_dir(path)) {
      // The job's report first (the ranks it holds decide what their own reports add), then the
      // spawned jobs' gathered reports and the per-rank ones.
      auto found = gathered_files(path);
      auto ranks = rank_files(path);
      found.insert(found.end(), ranks.begin(), ranks.end());
      const std::string job = path + "/report.json";
      if (exists(job)) {
        bool take = found.empty();
        if (!take) {
          try {
            take = is_gathered(load(job));
          } catch (const ReportError&) {
          }
        }
        if (take) found.insert(found.begin(), job);
      }
      if (found.empty())
        throw ReportError(path + ": no reports (report.json, rank-*.json, job-*-rank-*.json) in this directory");
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(path);
    }
  }
  // (A merged report is merged again too: its suppressed findings come back, and the
  // suppressions given now decide.)
  Json report = merge_files(files);
  if (!g_suppressions.empty()) {
    symbolize(report);
    suppress(report, g_suppressions);
  }
  return report;
}

Json symbolized(Json report) {
  symbolize(report);
  return report;
}

void write_output(const std::string& path, const std::string& content, bool force) {
  if (exists(path) && !force) fail(path + ": already exists (pass --force to overwrite)");
  write_atomic(path, content, true);
}

int cmd_summary(const Inputs& a) {
  std::string out = summary_text(symbolized(load_inputs(a.reports)));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int cmd_merge(const Inputs& a) {
  Json merged = load_inputs(a.reports);
  if (exists(a.output) && !a.force) fail(a.output + ": already exists (pass --force to overwrite)");
  write_atomic(a.output, dump(merged, 1) + "\n");
  std::int64_t ranks = 0;
  if (const Json* rs = member(merged, "ranks"); rs && rs->is_array())
    for (const Json& r : *rs)
      if (!truthy(r, "after_gathered")) ranks = add_sat(ranks, ranks_in_entry(r));
  std::fprintf(stderr, "attrcheck-report: merged %lld rank report(s) into %s\n", static_cast<long long>(ranks),
               a.output.c_str());
  return 0;
}

int cmd_gate(const Inputs& a) {
  Json report = load_inputs(a.reports);
  std::vector<const Json*> findings;
  for (const Json* f : at_or_above(report["findings"], a.fail_on)) {
    bool match = a.rules.empty();
    for (const auto& g : a.rules) match = match || ::fnmatch(g.c_str(), text(*f, "rule").c_str(), 0) == 0;
    if (match) findings.push_back(f);
  }
  for (const Json* f : findings) {
    const Json* count = member(*f, "count");
    std::fprintf(stderr, "attrcheck-report: %s %s x%s: %s\n", text(*f, "severity", "None").c_str(),
                 text(*f, "rule", "None").c_str(), count ? py_str(*count).c_str() : "1", text(*f, "message").c_str());
  }
  std::string scope;
  for (const auto& g : a.rules) scope += (scope.empty() ? " matching " : ", ") + g;
  std::fprintf(stderr, "attrcheck-report: gate %s: %zu finding(s) at or above %s%s\n",
               findings.empty() ? "passed" : "FAILED", findings.size(), a.fail_on.c_str(), scope.c_str());
  return findings.empty() ? 0 : 1;
}

int cmd_sarif(const Inputs& a) {
  write_output(a.output, sarif(symbolized(load_inputs(a.reports)), kToolVersion), a.force);
  return 0;
}

int cmd_junit(const Inputs& a) {
  write_output(a.output, junit(symbolized(load_inputs(a.reports))), a.force);
  return 0;
}

int cmd_html(const Inputs& a) {
  write_output(a.output, html(symbolized(load_inputs(a.reports))), a.force);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(kUsage, "attrcheck-report");
  app.footer(kEpilog);
  app.set_version_flag("--version", std::string("attrcheck-report ") + kToolVersion);
  std::string suppressions;
  bool no_defaults = false;
  app.add_option("--suppressions", suppressions,
                 "leave out findings matching 'RULE_GLOB fun:|lib:|src:|at:GLOB' lines (kept as counts)")
      ->type_name("FILE");
  app.add_flag("--no-default-suppressions", no_defaults,
               "do not apply the default suppressions shipped with attrcheck (default.supp)");
  app.require_subcommand(1);
  Inputs in;
  int (*run)(const Inputs&) = nullptr;
  auto reports_arg = [&in](CLI::App* sub) {
    sub->add_option("reports", in.reports, "rank reports, merged reports or run directories")
        ->required()
        ->type_name("REPORT");
  };
  auto output_args = [&in](CLI::App* sub) {
    sub->add_option("-o,--output", in.output, "the file to write")->required()->type_name("OUT");
    sub->add_flag("--force", in.force, "overwrite OUT if it exists");
  };
  CLI::App* summary = app.add_subcommand("summary", "print a summary table");
  reports_arg(summary);
  summary->callback([&run] { run = cmd_summary; });
  CLI::App* merge = app.add_subcommand("merge", "merge reports into one");
  reports_arg(merge);
  output_args(merge);
  merge->callback([&run] { run = cmd_merge; });
  CLI::App* gate = app.add_subcommand("gate", "exit 1 when findings at or above a severity exist");
  reports_arg(gate);
  gate->add_option("--fail-on", in.fail_on, "error (default), warning or info")
      ->check(CLI::IsMember({"error", "warning", "info"}))
      ->type_name("SEVERITY");
  gate->add_option("--rule", in.rules, "only rules matching GLOB (repeatable)")->type_name("GLOB")->allow_extra_args(false);
  gate->callback([&run] { run = cmd_gate; });
  struct Writer {
    const char* name;
    const char* help;
    int (*fn)(const Inputs&);
  };
  for (const Writer& w : {Writer{"sarif", "write SARIF 2.1.0", cmd_sarif}, Writer{"junit", "write JUnit XML", cmd_junit},
                          Writer{"html", "write a page to review the report", cmd_html}}) {
    CLI::App* sub = app.add_subcommand(w.name, w.help);
    reports_arg(sub);
    output_args(sub);
    auto fn = w.fn;
    sub->callback([&run, fn] { run = fn; });
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "attrcheck-report: error: %s\nattrcheck-report: see 'attrcheck-report --help'\n", e.what());
    return 2;
  }
  try {
    if (!suppressions.empty()) g_suppressions = load_suppressions(suppressions);
    if (!no_defaults) {
      auto defaults = default_suppressions();
      g_suppressions.insert(g_suppressions.end(), defaults.begin(), defaults.end());
    }
    return run ? run(in) : 2;
  } catch (const ReportError& e) {
    fail(e.what());
  } catch (const std::exception& e) {  // e.g. out of memory: still an error, never a crash
    fail(e.what());
  }
}
