#!/usr/bin/env python3
"""The MPI microbenchmark and scripts/bench-mpi.sh produce every row they promise.

Behaviour only, never timing: with a tiny iteration count (`--count`) the benchmark prints one
parseable "op <name> [<config>] ns <x>" line per operation and keyval configuration and the
paired get/set lines for both configurations, natively and under the launcher (where the rank
writes its report, clean: the benchmark is a correct program); `--only` selects one operation;
bench-mpi.sh's table has every operation and configuration with a ratio to native for each mode;
`--thread multiple` initialises MPI at MPI_THREAD_MULTIPLE (the report says so) and runs every
operation, and an unknown level is refused.
Usage: test_mpi_bench.py BUILD_DIR"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")
BENCH = os.path.join(BUILD, "bench", "mpi_attr_bench")
LAUNCHER = os.path.join(BUILD, "bin", "attrcheck")
with open(os.path.join(BUILD, "lib", "attrcheck", "mpi-build.json")) as f:
    MPIEXEC = json.load(f)["mpiexec"] or "mpiexec"
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
OPS = ["get", "set", "set+delete", "dup+free (64 attrs)", "keyval create+free"]
CONFIGS = ["user", "predefined"]
NAMES = [f"{op} [{c}]" for op in OPS for c in CONFIGS]
PAIRS = [f"{op} [{c}]" for c in CONFIGS for op in ("get", "set")]
OP_LINE = re.compile(r"^op (.+?)\s+ns\s+(\S+)$")
PAIR_LINE = re.compile(r"^pair (.+?)\s+library_ns\s+(\S+) tool_ns\s+(\S+) ratio\s+(\S+)$")


def run(cmd, **kw):
    return subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120, **kw)


def positive(text):
    x = float(text)
    return math.isfinite(x) and x > 0


class BenchOutput(unittest.TestCase):
    def parse(self, stdout):
        ops, pairs = [], []
        for line in stdout.splitlines():
            if m := OP_LINE.match(line):
                self.assertTrue(positive(m.group(2)), line)
                ops.append(m.group(1))
            elif m := PAIR_LINE.match(line):
                self.assertTrue(all(positive(m.group(i)) for i in (2, 3, 4)), line)
                pairs.append(m.group(1))
        return ops, pairs

    def test_native_prints_every_op_and_config(self):
        p = run([MPIEXEC, "-n", "1", BENCH, "--count", "3"])
        self.assertEqual(p.returncode, 0, p.stderr)
        ops, pairs = self.parse(p.stdout)
        self.assertEqual(ops, NAMES)
        self.assertEqual(pairs, PAIRS)

    def test_only_selects_one_op_without_pairs(self):
        p = run([MPIEXEC, "-n", "1", BENCH, "--count", "2", "--only", "setdel:predefined"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.parse(p.stdout), (["set+delete [predefined]"], []))

    def test_unknown_op_fails(self):
        p = run([MPIEXEC, "-n", "1", BENCH, "--count", "2", "--only", "nothing:user"])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no operation nothing:user", p.stderr)

    def test_thread_multiple_under_the_tool_runs_every_op_clean(self):
        with tempfile.TemporaryDirectory(prefix="attrcheck-bench-") as out:
            p = run([LAUNCHER, "--mode", "shadow", "--output", out, "--", MPIEXEC, "-n", "1", BENCH,
                     "--count", "3", "--no-pairs", "--thread", "multiple"])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("thread multiple", p.stdout.splitlines())
            self.assertEqual(self.parse(p.stdout), (NAMES, []))
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            self.assertEqual(report["ranks"][0]["thread_level"], "MPI_THREAD_MULTIPLE")
            self.assertEqual(report["findings"], [])

    def test_unknown_thread_level_fails(self):
        p = run([MPIEXEC, "-n", "1", BENCH, "--count", "2", "--thread", "sometimes"])
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("usage", p.stderr)

    def test_under_the_tool_every_op_runs_and_the_report_is_clean(self):
        with tempfile.TemporaryDirectory(prefix="attrcheck-bench-") as out:
            p = run([LAUNCHER, "--mode", "shadow", "--output", out, "--", MPIEXEC, "-n", "1", BENCH,
                     "--count", "3"])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            ops, pairs = self.parse(p.stdout)
            self.assertEqual(ops, NAMES)
            self.assertEqual(pairs, PAIRS)
            self.assertEqual(os.listdir(out), ["report.json"])  # the job's report, and nothing else
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            self.assertEqual(report["ranks"][0]["mode"], "shadow")
            self.assertEqual(report["findings"], [])

    def test_bench_mpi_script_has_every_row_and_ratio(self):
        p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "bench-mpi.sh")], capture_output=True,
                           text=True, timeout=300, env=dict(ENV, BUILD_DIR=BUILD, ROUNDS="1", COUNT="3"))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        header = lines[0].split()
        self.assertEqual(header[:5], ["operation", "native", "ns", "off", "ns"])
        table = {l[:34].strip(): l[34:].split() for l in lines[1:1 + len(NAMES)]}
        self.assertEqual(list(table), NAMES)
        for name, cells in table.items():
            self.assertEqual(len(cells), 7, name)  # 4 ns, 3 ratios
            self.assertTrue(all(positive(c) for c in cells), (name, cells))
        paired_at = lines.index(next(l for l in lines if l.startswith("paired in one process")))
        paired = {l[:34].strip(): l[34:].split() for l in lines[paired_at + 2:] if l.strip()}
        self.assertEqual(sorted(paired), sorted(PAIRS))
        for name, cells in paired.items():
            self.assertEqual(len(cells), 4, name)
            self.assertTrue(all(positive(c) for c in cells), (name, cells))


if __name__ == "__main__":
    unittest.main()
