#!/usr/bin/env python3
"""The launcher's fixed cost per run: `attrcheck --mode MODE -- mpirun -np 2 ./app` against
`mpirun -np 2 ./app`, on a program that only starts and stops MPI (bench/mpi_init_finalize.c) or
on the demo (a few findings to merge and symbolize). Runs the two commands in interleaved pairs
and prints the median wall time of each and their ratio (a benchmark: no thresholds;
docs/performance.md compares them with the targets). Fails if the checked run's report does not
show attrcheck in both ranks (this build's launcher).

usage: launcher_cost.py BUILD_DIR [--pairs N] [--mode off|shadow|emulate] [--program init|demo]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import mpi_config  # noqa: E402
import report_files  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--mode", default="off")
    ap.add_argument("--program", choices=("init", "demo"), default="init")
    ap.add_argument("--launcher", help="another attrcheck launcher to time instead of BUILD_DIR's (e.g. an older one)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    mpi = mpi_config.load(build)
    env = mpi.env()
    app = os.path.join(build, "bench", "mpi_init_finalize") if a.program == "init" else \
        os.path.join(build, "examples", "demo")
    native = mpi.mpiexec(2, app)
    out = tempfile.mkdtemp(prefix="attrcheck-cost-")
    checked = [a.launcher or os.path.join(build, "bin", "attrcheck"), "--mode", a.mode, "--output", out,
               "--fail-on", "never", "--"] + native

    def wall(cmd):
        start = time.monotonic()
        # The program's own exit status is not looked at: natively MPICH aborts the demo at its
        # wrong-kind get, which attrcheck refuses.
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.monotonic() - start

    try:
        wall(native), wall(checked)  # warm the page cache
        # What is timed is a checked run: the job's report shows both ranks in the mode (off: none;
        # another launcher, perhaps older, may write its reports otherwise).
        problems, _ = report_files.ran(os.path.join(out, "report.json"), 2, a.mode, calls_made=a.program == "demo")
        if problems and not a.launcher:
            sys.exit("launcher_cost: attrcheck did not run: " + "; ".join(problems))
        plain, tool = [], []
        for _ in range(a.pairs):
            plain.append(wall(native))
            tool.append(wall(checked))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    p, t = statistics.median(plain), statistics.median(tool)
    print(f"{a.program} --mode {a.mode}: mpirun {p:.3f} s, attrcheck {t:.3f} s, ratio {t / p:.2f}x, "
          f"+{(t - p) * 1000:.0f} ms (median of {a.pairs} interleaved pairs)")


if __name__ == "__main__":
    sys.exit(main())
