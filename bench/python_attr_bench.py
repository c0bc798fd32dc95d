#!/usr/bin/env python3
"""What an attribute call made from Python costs under attrcheck, with and without Python frames:
mpi4py's comm.Get_attr, comm.Set_attr (replacing a value: mpi4py's delete callback runs) and a
Set_attr + Delete_attr pair, each called N times, and a comm.Dup + Free pair (N / 50 times: mpi4py
makes both calls without the GIL, and the new communicator's "object created" takes its Python
frame then) from a function three Python frames deep, timed in
the rank (time.perf_counter_ns, best of 5 repetitions per run: the launcher and MPI_Init are not
timed). The configurations run in interleaved rounds on one machine, so that load from elsewhere
falls on all alike, and the table gives each configuration's median over the rounds and its ratio
to shadow mode without Python frames (ATTRCHECK_PYTHON_FRAMES=0) and to the native run. A benchmark:
it reports numbers and asserts no threshold (docs/performance.md has the numbers it gave); it fails
if a run fails or a checked run's report does not show attrcheck at work.

usage: python_attr_bench.py BUILD_DIR [--python PYTHON] [--rounds R] [--count N]
       (the rank's part: python_attr_bench.py --worker N)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = [  # (name, attrcheck mode or None for native, Python frames read)
    ("native", None, False),
    ("shadow, no Python frames", "shadow", False),
    ("shadow", "shadow", True),
    ("emulate, no Python frames", "emulate", False),
    ("emulate", "emulate", True),
]
OPS = ("get", "set", "set+delete", "dup+free")


def worker(n):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD.Dup()
    key = MPI.Comm.Create_keyval()  # mpi4py's own copy and delete callbacks (Python values)
    comm.Set_attr(key, 0)
    other = MPI.Comm.Create_keyval()

    def get(n):
        for _ in range(n):
            comm.Get_attr(key)

    def put(n):
        for i in range(n):
            comm.Set_attr(key, i)

    def put_delete(n):
        for i in range(n):
            comm.Set_attr(other, i)
            comm.Delete_attr(other)

    def dup_free(n):
        for _ in range(n):
            comm.Dup().Free()

    def depth3(fn, n):  # the calls are made three Python frames deep
        def a():
            return b()

        def b():
            start = time.perf_counter_ns()
            fn(n)
            return time.perf_counter_ns() - start
        return a()

    out = {}
    for name, fn, count in (("get", get, n), ("set", put, n), ("set+delete", put_delete, n),
                            ("dup+free", dup_free, max(n // 50, 10))):
        depth3(fn, count // 10)  # warm up
        out[name] = min(depth3(fn, count) for _ in range(5)) / count
    comm.Delete_attr(key)
    comm.Free()
    MPI.Comm.Free_keyval(key)
    MPI.Comm.Free_keyval(other)
    print("RESULT " + json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?")
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python that has mpi4py")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--worker", type=int)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker)
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import mpi_config  # noqa: E402
    import report_files  # noqa: E402
    build = os.path.abspath(a.build)
    mpi = mpi_config.load(build)
    base_env = mpi.env()
    out = tempfile.mkdtemp(prefix="attrcheck-pybench-")
    rank = mpi.mpiexec(1, a.python, os.path.abspath(__file__), "--worker", str(a.count))
    samples = {c[0]: {op: [] for op in OPS} for c in CONFIGS}
    for _ in range(a.rounds):
        for name, mode, frames in CONFIGS:
            env = dict(base_env, ATTRCHECK_PYTHON_FRAMES="1" if frames else "0")
            cmd = rank if mode is None else [os.path.join(build, "bin", "attrcheck"), "--mode", mode, "--output",
                                             out, "--fail-on", "never", "--"] + rank
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if p.returncode != 0 or not line:
                sys.exit(f"{name}: failed ({p.returncode}): {p.stdout[-2000:]} {p.stderr[-2000:]}")
            if mode is not None:
                problems, _ = report_files.ran(os.path.join(out, "report.json"), 1, mode)
                if problems:
                    sys.exit(f"{name}: attrcheck did not run: " + "; ".join(problems))
            for op, ns in json.loads(line[0][7:]).items():
                samples[name][op].append(ns)
    med = {name: {op: statistics.median(v) for op, v in ops.items()} for name, ops in samples.items()}
    print(f"ns per call from Python (median of {a.rounds} interleaved rounds, {a.count} calls, best of 5 each); "
          f"ratio to shadow without Python frames / to native")
    print(f"{'configuration':28}" + "".join(f"{op:>26}" for op in OPS))
    for name, _, _ in CONFIGS:
        cells = []
        for op in OPS:
            ns = med[name][op]
            cells.append(f"{ns:8.0f} {ns / med['shadow, no Python frames'][op]:6.2f}x {ns / med['native'][op]:6.2f}x")
        print(f"{name:28}" + "".join(f"{c:>26}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
