#!/usr/bin/env python3
"""The attrcheck launcher as a user drives it: options, exit codes, both ways of launching,
the --on-error policies, and how reports are written.

usage: test_launcher.py BUILD_DIR   (needs build/bin/attrcheck, build/examples/demo and the
                                     MPI test case binaries)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.abspath("build")
LAUNCHER = os.path.join(BUILD, "bin", "attrcheck")
DEMO = os.path.join(BUILD, "examples", "demo")
CASES = os.path.join(BUILD, "tests", "mpi")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_config  # noqa: E402
import report_files  # noqa: E402

MPI = mpi_config.load(BUILD)  # the build's MPI library and its launcher (mpiexec.mpich for MPICH)
ENV = MPI.env()


def mpirun(np, *command):
    return MPI.mpiexec(np, *command)


def run(args, **kw):
    return subprocess.run(args, env=kw.pop("env", ENV), capture_output=True, text=True, timeout=120, **kw)


class LauncherTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="attrcheck-test-")
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def merged(self):
        with open(os.path.join(self.out, "report.json")) as f:
            return json.load(f)

    # --- options -------------------------------------------------------------------------------

    def test_help_documents_every_option(self):
        p = run([LAUNCHER, "--help"])
        self.assertEqual(p.returncode, 0)
        for option in ("--mode", "--output", "--on-error", "--fail-on", "shadow", "emulate", "off",
                       "report", "errhandler", "abort", "exit status"):
            self.assertIn(option, p.stdout)

    def test_bad_option_values_are_clear_errors(self):
        for args, words in ((["--mode", "fast"], "--mode must be one of shadow, emulate, off"),
                            (["--fail-on", "sometimes"], "--fail-on must be one of"),
                            (["--on-error=explode"], "--on-error must be one of"),
                            (["--frobnicate"], "unknown option '--frobnicate'"),
                            (["--portable-to", "openmpi-5.0,mpich-9.9"], "--portable-to: 'mpich-9.9' is no release series"),
                            (["--mode"], "--mode needs a value"),
                            ([], "no command given")):
            p = run([LAUNCHER] + args + (["--", "true"] if args and args != ["--mode"] else []))
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(words, p.stderr, args)

    def test_missing_command_is_an_error(self):
        p = run([LAUNCHER, "--", "/nonexistent/program"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot run /nonexistent/program", p.stderr)

    # --- outside mpirun: attrcheck -- mpirun ... ------------------------------------------------

    def test_outer_launch_merges_ranks_and_gates_on_errors(self):
        p = run([LAUNCHER, "--output", self.out, "--", *mpirun(2, DEMO)])
        self.assertEqual(p.returncode, 1, p.stderr)  # the demo has errors; the demo itself exits 0
        report = self.merged()
        self.assertEqual(report["schema"], "attrcheck.report")
        self.assertEqual(sorted(rank for (_, rank), _ in report_files.rank_entries(report)), [0, 1])
        rules = {f["rule"]: f for f in report["findings"]}
        self.assertEqual(rules["keyval.double-free"]["ranks"], [0, 1])
        self.assertEqual(rules["keyval.double-free"]["count"], 2)
        self.assertIn("keyval.double-free", p.stderr)  # the summary table
        self.assertEqual(report["exit_code"], 0)

    def test_fail_on_threshold(self):
        self.assertEqual(run([LAUNCHER, "--output", self.out, "--fail-on", "never", "--",
                              *mpirun(1, DEMO)]).returncode, 0)
        # A clean program passes even at --fail-on info.
        clean = os.path.join(CASES, "case_hdf5_pattern")
        self.assertEqual(run([LAUNCHER, "--output", self.out, "--fail-on", "info", "--",
                              *mpirun(1, clean)]).returncode, 0)

    def test_portable_to_makes_the_series_portability_findings_gate(self):
        # A get on a communicator from MPI_Comm_create_group: its portability finding concerns the
        # series that copy otherwise than this run (shadow mode on Open MPI 4.1 / 5.0 copies).
        gate = os.path.join(CASES, "case_portability_gate")
        copies_here = MPI.release in ("openmpi-4.1", "openmpi-5.0")
        concerned, unconcerned = ("mpich-4.2", "openmpi-5.0") if copies_here else ("openmpi-4.1", "mpich-4.2")

        def status(*portable):
            return run([LAUNCHER, "--output", self.out, "--fail-on", "warning", *portable, "--",
                        *mpirun(1, gate)]).returncode
        self.assertEqual(status(), 0)  # info by default
        self.assertEqual(status("--portable-to", unconcerned), 0)
        self.assertEqual(status("--portable-to", concerned), 1)
        finding = next(f for f in self.merged()["findings"] if f["rule"] == "portability.create-group-copies-attributes")
        self.assertEqual(finding["severity"], "warning")
        self.assertIn(concerned, finding["portability"]["differs_on"])
        self.assertEqual(status("--portable-to", "all"), 1)
        # The environment's ATTRCHECK_PORTABLE_TO, where the launcher is not used; a bad one is said.
        env = dict(ENV, LD_PRELOAD=os.path.join(BUILD, "lib", "libattrcheck.so"), ATTRCHECK_OUTPUT=self.out,
                   ATTRCHECK_PORTABLE_TO="all")
        self.assertEqual(run(mpirun(1, gate), env=env).returncode, 0)
        self.assertEqual({f["severity"] for f in self.merged()["findings"] if f["rule"].startswith("portability.")},
                         {"warning"})
        p = run(mpirun(1, gate), env=dict(env, ATTRCHECK_PORTABLE_TO="mpich-9.9"))
        self.assertIn("ATTRCHECK_PORTABLE_TO='mpich-9.9' is not valid (expected all, or release series", p.stderr)
        self.assertEqual({f["severity"] for f in self.merged()["findings"] if f["rule"].startswith("portability.")},
                         {"info"})

    def test_the_commands_failure_is_its_exit_status(self):
        p = run([LAUNCHER, "--output", self.out, "--fail-on", "never", "--",
                 *mpirun(2, os.path.join(CASES, "case_abort"))])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the command failed with exit status", p.stderr)
        self.assertIn("aborted", {r["status"] for r in self.merged()["ranks"]})

    def test_a_crash_fails_a_command_that_exited_0(self):
        # What an MPI launcher that loses a rank's end does (MPICH 4.2.1's Hydra exits 0 when two
        # ranks end abnormally at once), here made certain: the command is a shell that runs
        # mpiexec and exits 0 whatever it returned. The ranks' own reports still say it.
        swallow = ["sh", "-c", '"$@"; exit 0', "sh"]
        for case, status, words in (("case_crash_no_finalize", 128 + 11,
                                     "rank 0 crashed: its report says signal 11 ended it"),
                                    ("case_killed_after_finding", 128 + 9,
                                     "every rank was killed before it could write its report")):
            p = run([LAUNCHER, "--output", self.out, "--fail-on", "never", "--", *swallow,
                     *mpirun(1, os.path.join(CASES, case))])
            self.assertEqual(p.returncode, status, p.stderr)
            self.assertIn(f"the command exited 0, but {words}", p.stderr)
            self.assertEqual(self.merged()["exit_code"], 0)  # the report keeps the command's own
        # A run whose ranks all ended normally keeps the command's 0, and so does one whose other
        # ranks its launcher may kill once one ended by itself (exit_no_finalize: MPICH's mpiexec
        # kills them, SIGKILL, and exits 0).
        self.assertEqual(run([LAUNCHER, "--output", self.out, "--fail-on", "never", "--", *swallow,
                              *mpirun(1, DEMO)]).returncode, 0)
        p = run([LAUNCHER, "--output", self.out, "--fail-on", "never", "--", *swallow,
                 *mpirun(2, os.path.join(CASES, "case_exit_no_finalize"))])
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_stale_reports_of_an_earlier_run_are_not_merged(self):
        run([LAUNCHER, "--output", self.out, "--", *mpirun(2, DEMO)])
        run([LAUNCHER, "--output", self.out, "--", *mpirun(1, DEMO)])
        self.assertEqual([rank for (_, rank), _ in report_files.rank_entries(self.merged())], [0])

    def test_suppressions_and_quiet_ranks(self):
        supp = os.path.join(self.dir, "demo.supp")
        with open(supp, "w") as f:
            f.write("keyval.* fun:main\n")
        p = run([LAUNCHER, "--suppressions", supp, "--output", self.out, "--", *mpirun(2, DEMO)])
        self.assertEqual(p.returncode, 0, p.stderr)  # the only errors were keyval.* ones
        self.assertIn("suppressed", p.stderr)
        self.assertNotIn("==attrcheck==", p.stderr)  # ranks leave the summary to the launcher
        self.assertGreater(self.merged()["summary"]["suppressed"], 0)
        with open(supp, "w") as f:
            f.write("keyval.*\n")
        p = run([LAUNCHER, "--suppressions", supp, "--output", self.out, "--", *mpirun(2, DEMO)])
        self.assertEqual(p.returncode, 2)  # refused before running anything
        self.assertIn(f"{supp}:1:", p.stderr)
        self.assertNotIn("demo: done", p.stdout)

    @unittest.skipUnless(MPI.library == "openmpi", "Debian's python3-mpi4py is built against Open MPI only")
    def test_default_suppressions_leave_out_mpi4py_lock_table_only(self):
        # A pickled collective makes mpi4py (Debian's python3-mpi4py: 3.1.4, 4.0.3) cache its lock
        # table on MPI_COMM_WORLD: benign, suppressed by default, counted. The program's own
        # attribute with a delete callback on MPI_COMM_WORLD, set through mpi4py too, is still
        # reported.
        program = ("from mpi4py import MPI\n"
                   "c = MPI.COMM_WORLD\n"
                   "print(c.allreduce(c.Get_rank()))\n"
                   "key = MPI.Comm.Create_keyval(delete_fn=lambda comm, k, v: None)\n"
                   "c.Set_attr(key, 'mine')\n"
                   "MPI.Comm.Free_keyval(key)\n")
        command = ["--output", self.out, "--fail-on", "warning", "--", "mpirun", "-np", "2",
                   "/usr/bin/python3", "-c", program]
        p = run([LAUNCHER] + command)
        self.assertEqual(p.returncode, 1, p.stderr)  # the program's own attribute
        # (the lock table's attr.world-at-finalize and its portability twin, on each rank)
        self.assertIn("4 suppressed (4 by default suppressions)", p.stderr)
        merged = self.merged()
        world = [f for f in merged["findings"] if f["rule"] == "attr.world-at-finalize"]
        self.assertEqual([f["count"] for f in world], [2])
        self.assertEqual(sorted((s["rule"], s["count"], s.get("default")) for s in merged["suppressed"]),
                         [("attr.world-at-finalize", 2, True),
                          ("portability.world-attributes-deleted-at-finalize", 2, True)])
        self.assertRegex(merged["suppressed"][0]["suppression"], r"/lib/attrcheck/default\.supp:\d+$")
        self.assertEqual(merged["summary"]["suppressed"], 4)
        # The program's own attribute's portability finding stays (info).
        own = [f for f in merged["findings"] if f["rule"] == "portability.world-attributes-deleted-at-finalize"]
        self.assertEqual([(f["count"], f["severity"]) for f in own], [(2, "info")])
        tool = os.path.join(BUILD, "bin", "attrcheck-report")
        self.assertIn("4 suppressed", run([tool, "summary", self.out]).stdout)
        self.assertNotIn("suppressed", run([tool, "--no-default-suppressions", "summary", self.out]).stdout)
        p = run([LAUNCHER, "--no-default-suppressions"] + command)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertNotIn("suppressed", p.stderr)
        world = [f for f in self.merged()["findings"] if f["rule"] == "attr.world-at-finalize"]
        self.assertEqual([f["count"] for f in world], [2, 2])

    def test_stack_depth_option(self):
        self.assertEqual(run([LAUNCHER, "--stack-depth", "99", "--", "true"]).returncode, 2)
        run([LAUNCHER, "--stack-depth", "0", "--output", self.out, "--fail-on", "never", "--",
             *mpirun(1, DEMO)])
        self.assertEqual(self.merged()["stacks"], [])
        run([LAUNCHER, "--stack-depth", "2", "--output", self.out, "--fail-on", "never", "--",
             *mpirun(1, DEMO)])
        self.assertTrue(all(len(s["frames"]) <= 2 for s in self.merged()["stacks"]))

    def test_provenance_stack_or_site(self):
        def provenance_depths(mode):
            self.assertEqual(run([LAUNCHER, "--provenance", mode, "--output", self.out, "--fail-on", "never", "--",
                                  *mpirun(1, DEMO)]).returncode, 0)
            report = self.merged()
            stacks = {s["id"]: s["frames"] for s in report["stacks"]}
            double = next(f for f in report["findings"] if f["rule"] == "keyval.double-free")
            return {p["what"]: len(stacks[p["stack"]]) for p in double["provenance"]}
        self.assertTrue(all(n > 1 for n in provenance_depths("stack").values()))
        self.assertEqual(provenance_depths("site"), {"keyval created": 1, "keyval freed": 1})
        self.assertEqual(run([LAUNCHER, "--provenance", "all", "--", "true"]).returncode, 2)

    # --- inside mpirun: mpirun ... attrcheck -- app ---------------------------------------------

    def test_inner_launch_preloads_each_rank_itself(self):
        p = run(mpirun(2, LAUNCHER, "--output", self.out, "--fail-on", "never", "--", DEMO))
        self.assertEqual(p.returncode, 0, p.stderr)
        report = self.merged()
        self.assertEqual(sorted(rank for (_, rank), _ in report_files.rank_entries(report)), [0, 1])
        self.assertIn("keyval.double-free", {f["rule"] for f in report["findings"]})
        self.assertEqual(p.stderr.count("rank report(s)"), 1, "the merged summary is printed once")

    def test_inherited_descriptors_reach_the_command(self):
        # Hydra (MPICH) hands each rank its PMI connection as an inherited descriptor (PMI_FD):
        # the launcher between it and the rank must not close it.
        r, w = os.pipe()
        try:
            p = subprocess.run([LAUNCHER, "--mode", "off", "--output", self.out, "--", "sh", "-c", f"echo kept >&{w}"],
                               env=ENV, capture_output=True, text=True, timeout=60, pass_fds=[w])
            os.close(w)
            w = None
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(os.read(r, 100), b"kept\n")
        finally:
            os.close(r)
            if w is not None:
                os.close(w)

    # --- modes and --on-error -------------------------------------------------------------------

    def test_off_mode_is_pass_through(self):
        p = run([LAUNCHER, "--mode", "off", "--output", self.out, "--", *mpirun(1, DEMO)])
        # The demo's own status, as without attrcheck (its seeded wrong-kind get is fatal in
        # MPICH, which rejects it; Open MPI answers it with flag 0).
        self.assertEqual(p.returncode, run(mpirun(1, DEMO)).returncode)
        self.assertEqual(self.merged()["findings"], [])

    def test_on_error_abort_reports_then_aborts(self):
        p = run([LAUNCHER, "--on-error", "abort", "--output", self.out, "--",
                 *mpirun(1, DEMO)])
        self.assertNotEqual(p.returncode, 0)
        self.assertNotIn("demo: done", p.stdout)  # the first error stopped the program
        report = self.merged()
        self.assertEqual(report["ranks"][0]["status"], "aborted")
        self.assertEqual(report["findings"][0]["rule"], "keyval.kind-mismatch")

    def test_on_error_errhandler_runs_the_fatal_handler_after_the_report(self):
        p = run([LAUNCHER, "--on-error", "errhandler", "--output", self.out, "--",
                 *mpirun(1, DEMO)])
        self.assertNotEqual(p.returncode, 0)  # MPI_ERRORS_ARE_FATAL on MPI_COMM_WORLD
        self.assertNotIn("demo: done", p.stdout)
        self.assertIn("keyval.kind-mismatch", {f["rule"] for f in self.merged()["findings"]})

    # --- report files ---------------------------------------------------------------------------

    def test_report_write_replaces_a_symlink_without_following_it(self):
        victim = os.path.join(self.dir, "victim")
        # Planted at the report's name (after the launcher's clean-up: run the app directly): the
        # job's report rank 0 writes, and a rank's own report (no gather).
        for name, gather in (("report.json", {}), ("rank-0.json", {"ATTRCHECK_GATHER_TIMEOUT": "0"})):
            shutil.rmtree(self.out, ignore_errors=True)
            os.makedirs(self.out)
            with open(victim, "w") as f:
                f.write("precious")
            os.symlink(victim, os.path.join(self.out, name))
            env = dict(ENV, LD_PRELOAD=os.path.join(BUILD, "lib", "libattrcheck.so"), ATTRCHECK_OUTPUT=self.out,
                       **gather)
            run(mpirun(1, DEMO), env=env)
            with open(victim) as f:
                self.assertEqual(f.read(), "precious", name)
            path = os.path.join(self.out, name)
            self.assertFalse(os.path.islink(path), name)
            with open(path) as f:
                data = json.load(f)
            self.assertEqual(data["run"]["status"] if "run" in data else data["ranks"][0]["status"], "finalized")

    def test_bad_environment_value_is_reported_and_defaulted(self):
        env = dict(ENV, LD_PRELOAD=os.path.join(BUILD, "lib", "libattrcheck.so"), ATTRCHECK_OUTPUT=self.out,
                   ATTRCHECK_MODE="sideways")
        p = run(mpirun(1, DEMO), env=env)
        self.assertEqual(p.returncode, 0)
        self.assertIn("ATTRCHECK_MODE='sideways' is not valid (expected shadow, emulate, off)", p.stderr)
        with open(os.path.join(self.out, "report.json")) as f:
            self.assertEqual(json.load(f)["ranks"][0]["mode"], "shadow")

if __name__ == "__main__":
    unittest.main(verbosity=2)
