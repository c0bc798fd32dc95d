#!/usr/bin/env python3
"""The HTML report as a person sees it: opened in headless Chromium, filtered, expanded.

usage: test_html_report.py BUILD_DIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.abspath("build")
TOOL = os.path.join(BUILD, "bin", "attrcheck-report")
LAUNCHER = os.path.join(BUILD, "bin", "attrcheck")
DEMO = os.path.join(BUILD, "examples", "demo")
DEMO_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "demo.c")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_config  # noqa: E402

MPI = mpi_config.load(BUILD)  # the build's MPI library and its launcher
ENV = MPI.env()
CONSTANTS, FINDINGS, WARNINGS = MPI.demo_expectations()  # what the demo reports on this library
# Headless, and quiet on this machine's closed network.
CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class HtmlReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="attrcheck-html-test-")
        run_dir = os.path.join(cls.dir, "run")
        subprocess.run([LAUNCHER, "--output", run_dir, "--fail-on", "never", "--", *MPI.mpiexec(2, DEMO)],
                       env=ENV, capture_output=True, timeout=120, check=True)
        cls.page = os.path.join(cls.dir, "report.html")
        subprocess.run([TOOL, "html", run_dir, "-o", cls.page], check=True, capture_output=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def view(self, fragment=""):
        """The page's DOM after its script ran, as Chromium renders it."""
        profile = tempfile.mkdtemp(dir=self.dir)
        p = subprocess.run(CHROMIUM + [f"--user-data-dir={profile}", "--dump-dom", f"file://{self.page}#{fragment}"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        return p.stdout

    def view_of(self, source, name, fragment=""):
        """The DOM of the page attrcheck-report makes of `source` (a report or a run directory)."""
        page = os.path.join(self.dir, name + ".html")
        subprocess.run([TOOL, "html", source, "-o", page, "--force"], check=True, capture_output=True, timeout=120)
        saved, self.page = self.page, page
        try:
            return self.view(fragment)
        finally:
            self.page = saved

    def write_json(self, report, name):
        import json
        path = os.path.join(self.dir, name + ".json")
        with open(path, "w") as f:
            json.dump(report, f)
        return path

    def rows(self, dom):
        return re.findall(r'<tr class="finding" data-rule="([^"]+)"', dom)

    def test_shows_every_finding_with_counts(self):
        dom = self.view()
        self.assertIn(f"Showing {FINDINGS} of {FINDINGS} findings", dom)
        self.assertIn("4 errors", dom)
        self.assertIn(f"{WARNINGS} warnings", dom)
        self.assertEqual(len(self.rows(dom)), FINDINGS)
        self.assertIn("main (demo.c:", dom)

    def test_portability_matrix_shows_behaviours_by_series(self):
        # The demo's MPI-1 calls: missing from Open MPI 6.0's standard ABI library.
        dom = self.view()
        self.assertIn("<h2>Portability</h2>", dom)
        self.assertEqual(re.findall(r'<tr class="portability-row" data-rule="([^"]+)"', dom),
                         ["portability.standard-abi-lacks-mpi1-calls"])
        matrix = dom[dom.index('<table class="portability">'):]
        matrix = matrix[:matrix.index("</table>")]
        self.assertEqual(re.findall(r"<th>([^<]+)</th>", matrix), ["behaviour", "openmpi-6.0"])
        self.assertEqual(len(re.findall(r'<td class="differs">', matrix)), 1)
        self.assertIn("demo.c:", matrix)  # the sites
        self.assertIn("(here: no)", matrix)

    def test_filters_by_rule_severity_and_rank(self):
        self.assertEqual(self.rows(self.view("rule=keyval.leak")), ["keyval.leak"])
        self.assertEqual(sorted(self.rows(self.view("severity=error"))), ["keyval.double-free", "keyval.kind-mismatch"])
        self.assertIn(f"Showing {FINDINGS} of {FINDINGS} findings", self.view("rank=7"))  # not a rank of this run: ignored
        self.assertEqual(len(self.rows(self.view("rank=1"))), FINDINGS)

    def test_a_gathered_jobs_runs_of_ranks(self):
        # Four ranks: the job's report says "ranks": [[0, 3]] of each finding, and of the ranks.
        run_dir = os.path.join(self.dir, "run4")
        subprocess.run([LAUNCHER, "--output", run_dir, "--fail-on", "never", "--", *MPI.mpiexec(4, DEMO)],
                       env=ENV, capture_output=True, timeout=120, check=True)
        dom = self.view_of(run_dir, "report4")
        self.assertIn("4 rank report(s)", dom)
        self.assertIn("0-3", dom)
        self.assertEqual(len(self.rows(self.view_of(run_dir, "report4", "rank=2"))), FINDINGS)
        self.assertIn('<option value="3">rank 3</option>', dom)

    def test_expanded_finding_shows_stacks_and_provenance(self):
        dom = self.view("rule=keyval.double-free&open=all")
        with open(DEMO_SOURCE) as f:
            source = f.readlines()
        created = re.search(r'keyval created</div><ol class="frames"><li>main \(demo\.c:(\d+)\)', dom)
        freed = re.search(r'keyval freed</div><ol class="frames"><li>main \(demo\.c:(\d+)\)', dom)
        self.assertTrue(created and freed, dom[-3000:])
        self.assertIn("MPI_Comm_create_keyval(MPI_COMM_DUP_FN", source[int(created.group(1)) - 1])
        self.assertIn("MPI_Comm_free_keyval(&cache_key)", source[int(freed.group(1)) - 1])
        self.assertIn("Fix: Free each keyval once", dom)
        self.assertNotIn("comm 0x0", dom)  # a keyval call has no object

    def test_python_frames_are_shown_first(self):
        # A Python program's stacks (schema 1.6): the first Python frame of the program's own code
        # (mpi4py's package trimmed) is where the finding is; expanded, each Python frame is one.
        import json
        with open(os.path.join(self.dir, "run", "report.json")) as f:
            report = json.load(f)
        finding = next(x for x in report["findings"] if x["rule"] == "keyval.double-free")
        frames = next(s for s in report["stacks"] if s["id"] == finding["stack"])["frames"]
        frames[1:1] = [{"python": True, "file": "/usr/lib/python3/dist-packages/mpi4py/util/pkl5.py", "line": 3,
                        "function": "wrapper"},
                       {"python": True, "file": "/home/u/app.py", "line": 46, "function": "double_free"}]
        dom = self.view_of(self.write_json(report, "python"), "python", "rule=keyval.double-free&open=all")
        row = dom.split('data-rule="keyval.double-free"')[1].split("</tr>")[0]
        self.assertIn("app.py:46 in double_free", row)
        self.assertIn("<li>app.py:46 in double_free [Python]</li>", dom)
        self.assertIn("<li>pkl5.py:3 in wrapper [Python]</li>", dom)

    def test_a_leak_at_finalize_from_python_is_where_it_was_made(self):
        # mpi4py runs MPI_Finalize from the interpreter's exit: no Python frame in the finding's
        # stack, so the page shows where the leaked keyval was created (its provenance's line).
        import json
        with open(os.path.join(self.dir, "run", "report.json")) as f:
            report = json.load(f)
        finding = next(x for x in report["findings"] if x["rule"] == "keyval.double-free")
        finding["call"] = "MPI_Finalize"
        site_frames = next(s for s in report["stacks"] if s["id"] == finding["stack"])["frames"]
        site_frames[:] = [{"address": "0x58f30", "module": "/usr/bin/python3.11", "offset": "0x58f30"}]
        created = next(p for p in finding["provenance"] if p["what"] == "keyval created")
        created_frames = next(s for s in report["stacks"] if s["id"] == created["stack"])["frames"]
        created_frames.insert(0, {"python": True, "file": "/home/u/app.py", "line": 10, "function": "make_keyval"})
        dom = self.view_of(self.write_json(report, "at-finalize"), "at-finalize", "rule=keyval.double-free")
        row = dom.split('data-rule="keyval.double-free"')[1].split("</tr>")[0]
        self.assertIn("app.py:10 in make_keyval", row)
        finding["call"] = "MPI_Comm_free_keyval"  # anywhere else: its own site, however unhelpful
        dom = self.view_of(self.write_json(report, "elsewhere"), "elsewhere", "rule=keyval.double-free")
        row = dom.split('data-rule="keyval.double-free"')[1].split("</tr>")[0]
        self.assertNotIn("app.py:10", row)
        self.assertIn("python3.11+0x58f30", row)

    def test_report_text_cannot_break_out_of_the_page(self):
        import json
        with open(os.path.join(self.dir, "run", "report.json")) as f:
            report = json.load(f)
        report["findings"][0]["message"] = '</script><script>document.title="pwned"</script><b>bold</b>'
        dom = self.view_of(self.write_json(report, "hostile"), "hostile")
        self.assertIn("<title>attrcheck report</title>", dom)
        self.assertNotIn('document.title="pwned"</script><b>', dom.split("<tbody")[1].split("</tbody>")[0])
        self.assertIn("&lt;/script&gt;&lt;script&gt;", dom)  # shown as text
        self.assertEqual(len(self.rows(dom)), FINDINGS)

    def test_a_screenshot_renders(self):
        shot = os.path.join(self.dir, "page.png")
        profile = tempfile.mkdtemp(dir=self.dir)
        subprocess.run(CHROMIUM + [f"--user-data-dir={profile}", "--window-size=1280,800", f"--screenshot={shot}",
                                   f"file://{self.page}#open=all"], capture_output=True, timeout=120, check=True)
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(shot), 20000)  # not a blank page


if __name__ == "__main__":
    unittest.main(verbosity=2)
