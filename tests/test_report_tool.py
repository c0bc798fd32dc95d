#!/usr/bin/env python3
"""attrcheck-report as CI and reviewers use it: summary, merge, gate, SARIF, JUnit, bad input.

usage: test_report_tool.py BUILD_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.abspath("build")
TOOL = os.path.join(BUILD, "bin", "attrcheck-report")
LAUNCHER = os.path.join(BUILD, "bin", "attrcheck")
DEMO = os.path.join(BUILD, "examples", "demo")
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reports", "attrcheck-report.schema.json")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_config  # noqa: E402

MPI = mpi_config.load(BUILD)  # the build's MPI library and its launcher
ENV = MPI.env()
CONSTANTS, FINDINGS, WARNINGS = MPI.demo_expectations()  # what the demo reports on this library


def tool(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=120)


class ReportToolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="attrcheck-report-test-")
        cls.run_dir = os.path.join(cls.dir, "run")
        # Each rank's own report, as a run without the launcher and without the gather leaves them.
        env = dict(ENV, LD_PRELOAD=os.path.join(BUILD, "lib", "libattrcheck.so"), ATTRCHECK_OUTPUT=cls.run_dir,
                   ATTRCHECK_GATHER_TIMEOUT="0", ATTRCHECK_RANK_SUMMARY="0")
        subprocess.run([*MPI.mpiexec(2, DEMO)], env=env, capture_output=True, timeout=120, check=True)
        # and the merged report beside them (the rank reports stay: attrcheck-report never removes any)
        subprocess.run([TOOL, "merge", cls.run_dir, "-o", os.path.join(cls.run_dir, "report.json")],
                       capture_output=True, timeout=120, check=True)
        cls.rank0 = os.path.join(cls.run_dir, "rank-0.json")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def out(self, name):
        return os.path.join(self.dir, name)

    def test_summary_of_a_run_directory_has_rules_ranks_and_source_lines(self):
        p = tool("summary", self.run_dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"4 error(s), {WARNINGS} warning(s)", p.stdout)
        line = next(l for l in p.stdout.splitlines() if "keyval.double-free" in l)
        self.assertIn("0-1", line)                 # both ranks
        self.assertIn("main (demo.c:", line)       # symbolized to the source line
        self.assertIn("freed a second time", line)

    def test_summary_says_on_which_series_the_run_would_differ(self):
        # The demo's two MPI-1 calls: missing from Open MPI 6.0's standard ABI library.
        p = tool("summary", self.run_dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("attrcheck: on openmpi-6.0 this run would differ: "
                      "portability.standard-abi-lacks-mpi1-calls (2 sites)", p.stdout)
        self.assertEqual(len([l for l in p.stdout.splitlines() if "this run would differ" in l]), 1)
        with open(os.path.join(self.run_dir, "report.json")) as f:
            found = [f for f in json.load(f)["findings"] if f["rule"] == "portability.standard-abi-lacks-mpi1-calls"]
        self.assertEqual(sorted(f["call"] for f in found), ["MPI_Attr_put", "MPI_Keyval_create"])
        for f in found:
            self.assertEqual((f["severity"], f["portability"]), ("info", {"here": "no", "differs_on": ["openmpi-6.0"]}))
            self.assertIn(f"{f['call']} is missing from the library's MPI standard ABI library", f["message"])

    def test_the_report_says_what_was_checked(self):
        ranks = []
        for name in ("rank-0.json", "rank-1.json"):
            with open(os.path.join(self.run_dir, name)) as f:
                ranks.append(json.load(f)["intercepted"])
        merged = self.out("checked.json")
        self.assertEqual(tool("merge", "-o", merged, self.run_dir).returncode, 0)
        with open(merged) as f:
            whole = json.load(f)
        for family, bindings in whole["intercepted"].items():
            for binding, n in bindings.items():
                self.assertEqual(n, sum(r[family][binding] for r in ranks), (family, binding))
        self.assertGreater(whole["intercepted"]["keyval"]["c"], 0)
        self.assertEqual([r["intercepted"] for r in whole["ranks"]], ranks)
        line = next(l for l in tool("summary", self.run_dir).stdout.splitlines() if l.startswith("attrcheck: checked "))
        self.assertIn(f"{whole['intercepted']['keyval']['c']} keyval, ", line)
        # A run whose calls never reached attrcheck says so, though it has no findings either.
        with open(self.rank0) as f:
            report = json.load(f)
        report["findings"], report["stacks"] = [], []
        report["summary"] = {"error": 0, "warning": 0, "info": 0, "dropped": 0}
        report["intercepted"] = {k: {"c": 0, "fortran": 0, "f08": 0} for k in report["intercepted"]}
        nothing = self.out("nothing-checked.json")
        with open(nothing, "w") as f:
            json.dump(report, f)
        self.assertIn("nothing was checked", tool("summary", nothing).stdout)

    def test_journals_of_killed_ranks_are_merged(self):
        # A rank killed with SIGKILL leaves only its journal (rank-N.journal: a header line, then
        # one line per finding as found, the last one possibly cut short); a rank that wrote its
        # report may have journalled findings after it.
        d = self.out("journals")
        os.makedirs(d)
        with open(self.rank0) as f:
            rank0 = json.load(f)
        shutil.copy(self.rank0, os.path.join(d, "rank-0.json"))
        stacks = {s["id"]: s for s in rank0["stacks"]}
        first = rank0["findings"][0]
        line = {"seq": 0, "finding": dict(first, stack=1), "stacks": [dict(stacks[first["stack"]], id=1)]}
        header = {"schema": "attrcheck.rank-journal", "version": "1.0", "tool": rank0["tool"],
                  "run": dict(rank0["run"], rank=1)}
        with open(os.path.join(d, "rank-1.journal"), "w") as f:
            f.write(json.dumps(header) + "\n" + json.dumps(line) + "\n" + json.dumps(line)[:40])
        later = dict(line, seq=len(rank0["findings"]), finding=dict(first, stack=1, message="found after the report"))
        with open(os.path.join(d, "rank-0.journal"), "w") as f:
            f.write(json.dumps(dict(header, run=rank0["run"])) + "\n" + json.dumps(line) + "\n" + json.dumps(later) + "\n")
        merged_path = self.out("journals.json")
        p = tool("merge", d, "-o", merged_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(merged_path) as f:
            merged = json.load(f)
        self.assertEqual(sorted((r["rank"], r["status"]) for r in merged["ranks"]), [(0, "finalized"), (1, "running")])
        self.assertEqual([r["file"] for r in merged["ranks"]], ["rank-0.json", "rank-1.journal"])
        same = [f for f in merged["findings"] if f["message"] == first["message"]]
        self.assertEqual(len(same), 1)
        self.assertEqual(same[0]["ranks"], [0, 1])
        self.assertEqual(same[0]["count"], first["count"] + 1)  # rank 0's seq 0 is in its report already
        self.assertIn("found after the report", {f["message"] for f in merged["findings"]})
        self.assertIn("rank 1 ended running", tool("summary", d).stdout)

    def test_merge_writes_one_report_and_refuses_to_overwrite(self):
        target = self.out("merged.json")
        p = tool("merge", self.rank0, os.path.join(self.run_dir, "rank-1.json"), "-o", target)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(target) as f:
            merged = json.load(f)
        self.assertEqual(merged["schema"], "attrcheck.report")
        self.assertEqual(sorted(r["rank"] for r in merged["ranks"]), [0, 1])
        double = next(f for f in merged["findings"] if f["rule"] == "keyval.double-free")
        self.assertEqual((double["count"], double["ranks"]), (2, [0, 1]))
        again = tool("merge", self.run_dir, "-o", target)
        self.assertEqual(again.returncode, 2)
        self.assertIn("already exists (pass --force to overwrite)", again.stderr)
        self.assertEqual(tool("merge", self.run_dir, "-o", target, "--force").returncode, 0)
        # A merged report merges again (e.g. several jobs of one CI run).
        self.assertEqual(tool("merge", target, self.rank0, "-o", self.out("twice.json")).returncode, 0)

    def test_merge_keeps_spawned_jobs_and_distinct_messages_apart(self):
        # rank 0 of the job the user started, and rank 0 of a job it spawned: one finding on both,
        # told apart; and a finding whose message differs (another object at the same site) is
        # its own finding, however the handle values differ.
        with open(self.rank0) as f:
            parent = json.load(f)
        self.assertEqual((parent["version"], parent["run"]["spawned"]), ("1.8", False))
        child = json.loads(json.dumps(parent))
        child["run"].update(job="4711", spawned=True, pid=parent["run"]["pid"] + 1)
        double = next(f for f in child["findings"] if f["rule"] == "keyval.double-free")
        other = dict(double, message=double["message"] + " (on comm 0x1234)")
        child["findings"].append(other)
        paths = []
        for name, data in (("rank-0.json", parent), ("job-4711-rank-0.json", child)):
            os.makedirs(self.out("spawned"), exist_ok=True)
            paths.append(os.path.join(self.out("spawned"), name))
            with open(paths[-1], "w") as f:
                json.dump(data, f)
        target = self.out("spawned.json")
        p = tool("merge", self.out("spawned"), "-o", target, "--force")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(target) as f:
            merged = json.load(f)
        # (the started job's id: Open MPI's PMIx namespace; none under MPICH's Hydra)
        self.assertEqual([(r["rank"], r.get("job") or "", r.get("spawned")) for r in merged["ranks"]],
                         [(0, parent["run"]["job"] or "", False), (0, "4711", True)])
        doubles = [f for f in merged["findings"] if f["rule"] == "keyval.double-free"]
        self.assertEqual(len(doubles), 2)
        # (told apart by the other object's words: MPICH's keyvals are in hex, 0xa4400001, too)
        same = next(f for f in doubles if "(on comm" not in f["message"])
        self.assertEqual((same["count"], same["ranks"], same["spawned_ranks"]), (2, [0], [{"job": "4711", "ranks": [0]}]))
        apart = next(f for f in doubles if "(on comm" in f["message"])
        self.assertEqual((apart["count"], apart["ranks"], apart["spawned_ranks"]), (1, [], [{"job": "4711", "ranks": [0]}]))
        line = next(l for l in tool("summary", target).stdout.splitlines() if same["message"] in l and "(on comm" not in l)
        self.assertIn("0 job 4711:0", line)
        # Merging the merged report again keeps them apart.
        again = self.out("spawned-again.json")
        self.assertEqual(tool("merge", target, self.rank0, "-o", again, "--force").returncode, 0)
        with open(again) as f:
            same = next(f for f in json.load(f)["findings"] if f["message"] == same["message"])
        self.assertEqual((same["count"], same["ranks"], same["spawned_ranks"]), (3, [0], [{"job": "4711", "ranks": [0]}]))

    def test_gate_by_severity_and_rule(self):
        self.assertEqual(tool("gate", self.run_dir).returncode, 1)  # errors exist
        self.assertEqual(tool("gate", self.run_dir, "--rule", "deprecated.*").returncode, 0)  # warnings only
        p = tool("gate", self.run_dir, "--rule", "deprecated.*", "--fail-on", "warning")
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"gate FAILED: {4 if CONSTANTS else 2} finding(s)", p.stderr)
        self.assertEqual(tool("gate", self.run_dir, "--rule", "thread.*", "--fail-on", "info").returncode, 0)

    def test_sarif_has_rules_and_results_at_source_lines(self):
        target = self.out("out.sarif")
        self.assertEqual(tool("sarif", self.run_dir, "-o", target, "--force").returncode, 0)
        with open(target) as f:
            sarif = json.load(f)
        self.assertEqual(sarif["version"], "2.1.0")
        run = sarif["runs"][0]
        rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
        self.assertIn("keyval.double-free", rules)
        self.assertNotIn("stable.id", rules)
        # A portability finding is a result like any other, at its own severity (info: a note).
        self.assertIn("portability.standard-abi-lacks-mpi1-calls", rules)
        notes = [r for r in run["results"] if r["ruleId"] == "portability.standard-abi-lacks-mpi1-calls"]
        self.assertEqual(len(notes), 2)
        self.assertEqual({r["level"] for r in notes}, {"note"})
        result = next(r for r in run["results"] if r["ruleId"] == "keyval.double-free")
        self.assertEqual(result["level"], "error")
        self.assertEqual(rules[result["ruleIndex"]], "keyval.double-free")
        loc = result["locations"][0]["physicalLocation"]
        self.assertTrue(loc["artifactLocation"]["uri"].endswith("examples/demo.c"))
        with open(os.path.join(os.path.dirname(SCHEMA), "..", "examples", "demo.c")) as f:
            source_line = f.readlines()[loc["region"]["startLine"] - 1]
        self.assertIn("MPI_Comm_free_keyval(&saved)", source_line)  # the line of the seeded bug
        self.assertEqual(result["occurrenceCount"], 2)
        self.assertEqual(result["properties"]["ranks"], [0, 1])

    def test_junit_one_case_per_rule_failures_for_findings(self):
        target = self.out("out.xml")
        self.assertEqual(tool("junit", self.run_dir, "-o", target, "--force").returncode, 0)
        suite = ET.parse(target).getroot().find("testsuite")
        cases = {c.get("name"): c for c in suite.findall("testcase")}
        with open(os.path.join(ROOT, "src", "checks", "rules.def")) as f:
            rules = len(re.findall(r"^RULE\(", f.read(), re.M))  # one test case per rule
        with open(os.path.join(ROOT, "src", "runtime", "profile", "mpi_profile.def")) as f:
            rules += len(re.findall(r"^PORTABILITY\(", f.read(), re.M))  # ... and per portability rule
        self.assertEqual(len(cases), rules)
        self.assertEqual(int(suite.get("tests")), rules)
        failed = sorted(n for n, c in cases.items() if c.find("failure") is not None)
        self.assertEqual(failed, ["attr.leak", "deprecated.call"] + ["deprecated.constant"] * CONSTANTS +
                         ["keyval.double-free", "keyval.kind-mismatch", "keyval.leak",
                          "portability.standard-abi-lacks-mpi1-calls"])
        self.assertEqual(int(suite.get("failures")), 7 if CONSTANTS else 6)
        self.assertIn("demo.c:", cases["keyval.double-free"].find("failure").text)

    def source_line(self, frame):
        with open(frame["file"]) as f:
            return f.readlines()[frame["line"] - 1]

    def test_findings_carry_stacks_and_provenance_at_source_lines(self):
        with open(os.path.join(self.run_dir, "report.json")) as f:
            report = json.load(f)
        stacks = {s["id"]: s["frames"] for s in report["stacks"]}
        double = next(f for f in report["findings"] if f["rule"] == "keyval.double-free")
        where = stacks[double["stack"]]
        self.assertEqual(where[0]["function"], "main")  # attrcheck's and MPI's frames trimmed
        self.assertIn("MPI_Comm_free_keyval(&saved)", self.source_line(where[0]))
        provenance = {p["what"]: stacks[p["stack"]][0] for p in double["provenance"]}
        self.assertIn("MPI_Comm_create_keyval(MPI_COMM_DUP_FN", self.source_line(provenance["keyval created"]))
        self.assertIn("MPI_Comm_free_keyval(&cache_key)", self.source_line(provenance["keyval freed"]))
        leak = next(f for f in report["findings"] if f["rule"] == "attr.leak")
        provenance = {p["what"]: stacks[p["stack"]][0] for p in leak["provenance"]}
        self.assertIn("MPI_Comm_set_attr(lib_comm", self.source_line(provenance["attribute set"]))
        self.assertIn("MPI_Comm_dup(MPI_COMM_WORLD, &lib_comm)", self.source_line(provenance["object created"]))
        # Each distinct stack is stored once.
        keys = [tuple((fr["module"], fr["offset"]) for fr in s["frames"]) for s in report["stacks"]]
        self.assertEqual(len(keys), len(set(keys)))
        summary = tool("summary", self.run_dir).stdout
        self.assertRegex(summary, r"keyval\.double-free at main \(demo\.c:\d+\):\n    keyval created at main "
                                  r"\(demo\.c:\d+\)\n    keyval freed at main \(demo\.c:\d+\)")

    def test_suppressions_leave_findings_out_but_keep_their_counts(self):
        supp = self.out("ok.supp")
        with open(supp, "w") as f:
            f.write("# the demo leaks on purpose\nkeyval.leak   fun:main\n\nattr.*  src:*/demo.c  # by file\n")
        p = tool("--suppressions", supp, "summary", self.run_dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("4 suppressed", p.stdout)
        self.assertNotIn("keyval.leak", p.stdout.split("provenance:")[0])
        target = self.out("suppressed.json")
        self.assertEqual(tool("--suppressions", supp, "merge", self.run_dir, "-o", target, "--force").returncode, 0)
        with open(target) as f:
            merged = json.load(f)
        self.assertEqual(sorted((s["rule"], s["count"], s["suppression"].rsplit(":", 1)[1]) for s in merged["suppressed"]),
                         [("attr.leak", 2, "4"), ("keyval.leak", 2, "2")])
        self.assertEqual(merged["summary"]["suppressed"], 4)
        self.assertNotIn("keyval.leak", {f["rule"] for f in merged["findings"]})
        # The gate honours them: with every error suppressed it passes.
        with open(supp, "a") as f:
            f.write("keyval.* lib:*/demo\n")
        self.assertEqual(tool("--suppressions", supp, "gate", self.run_dir).returncode, 0)
        self.assertEqual(tool("gate", self.run_dir).returncode, 1)

    def test_findings_say_how_their_keyval_was_made(self):
        # The demo's cache keyval: MPI_Comm_create_keyval(MPI_COMM_DUP_FN, cache_delete, &cache_key, NULL).
        with open(os.path.join(self.run_dir, "report.json")) as f:
            report = json.load(f)
        double = next(f for f in report["findings"] if f["rule"] == "keyval.double-free")
        made = double["keyval_callbacks"]
        self.assertEqual((made["copy"], made["extra_state"]), ("MPI_COMM_DUP_FN", "0x0"))
        module, _, offset = made["delete"].rpartition("+")
        self.assertEqual(os.path.realpath(module), os.path.realpath(DEMO))
        symbols = subprocess.run(["nm", DEMO], capture_output=True, text=True, check=True).stdout
        address = next(line.split()[0] for line in symbols.splitlines() if line.endswith(" cache_delete"))
        self.assertEqual(int(offset, 16), int(address, 16))  # a PIE: its symbols are offsets
        # A suppression can name the keyval so (a stripped module's functions have no names).
        supp = self.out("keyval.supp")
        with open(supp, "w") as f:
            f.write("keyval.double-free  keyval:copy=MPI_COMM_NULL_COPY_FN,*  # not how it was made\n"
                    "keyval.double-free  keyval:copy=MPI_COMM_DUP_FN,delete=*/demo+0x*,extra_state=0x0\n")
        target = self.out("keyval-suppressed.json")
        self.assertEqual(tool("--suppressions", supp, "merge", self.run_dir, "-o", target, "--force").returncode, 0)
        with open(target) as f:
            merged = json.load(f)
        self.assertEqual([(s["rule"], s["count"], s["suppression"].rsplit(":", 1)[1]) for s in merged["suppressed"]],
                         [("keyval.double-free", 2, "2")])

    def test_malformed_suppressions_name_the_file_and_line(self):
        for text, words in (("keyval.leak\n", "expected 'RULE_GLOB KIND:GLOB'"),
                            ("keyval.leak obj:foo\n",
                             "frame pattern must be fun:GLOB, lib:GLOB, src:GLOB, at:GLOB or keyval:GLOB"),
                            ("Keyval.Leak fun:x\n", "'Keyval.Leak' is not a rule id or glob")):
            supp = self.out("bad.supp")
            with open(supp, "w") as f:
                f.write("# fine\n\n" + text)
            p = tool("--suppressions", supp, "summary", self.run_dir)
            self.assertEqual(p.returncode, 2, text)
            self.assertIn(f"{supp}:3: {words}", p.stderr)

    def test_bad_input_is_a_clear_error(self):
        truncated = self.out("truncated.json")
        with open(self.rank0) as f, open(truncated, "w") as g:
            g.write(f.read()[:200])
        p = tool("summary", truncated)
        self.assertEqual(p.returncode, 2)
        self.assertRegex(p.stderr, r"truncated\.json:\d+:\d+: not valid JSON")
        future = self.out("future.json")
        with open(self.rank0) as f:
            data = json.load(f)
        data["version"] = "2.0"
        with open(future, "w") as g:
            json.dump(data, g)
        p = tool("gate", future)
        self.assertEqual(p.returncode, 2)
        self.assertIn("schema version 2.0 is not supported", p.stderr)
        p = tool("summary", self.out("missing.json"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("missing.json: No such file or directory", p.stderr)
        not_ours = self.out("other.json")
        with open(not_ours, "w") as g:
            g.write('{"hello": 1}')
        self.assertIn("not an attrcheck report", tool("summary", not_ours).stderr)
        self.assertEqual(tool("frobnicate", self.run_dir).returncode, 2)

    def test_reports_match_the_schema(self):
        import jsonschema
        with open(SCHEMA) as f:
            validator = jsonschema.Draft202012Validator(json.load(f))
        for path in (self.rank0, os.path.join(self.run_dir, "report.json")):
            with open(path) as f:
                self.assertEqual([e.message for e in validator.iter_errors(json.load(f))], [], path)
        with open(self.rank0) as f:
            bad = json.load(f)
        bad["findings"][0]["severity"] = "fatal"
        self.assertTrue(list(validator.iter_errors(bad)))  # the schema does constrain


if __name__ == "__main__":
    unittest.main(verbosity=2)
