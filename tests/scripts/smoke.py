#!/usr/bin/env python3
"""The commands README.md and docs/*.md tell users to run, each at the smallest size that still
takes its whole path, checked for what it is for: its table has every row, and every cell a
number. Behaviour only: no figure is compared with a threshold. The scripts check their own runs
(the job's report shows attrcheck at work: tests/report_files.py, ran), so a change to the report
that a script no longer reads makes its test fail, not its figures silently wrong.

usage: smoke.py BUILD_DIR COMMAND    (COMMAND: one of the functions below; exit 77: skipped, with why)
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import mpi_config  # noqa: E402
SKIP = 77  # the tests' SKIP_RETURN_CODE
BUILD = os.path.abspath(sys.argv[1])
with open(os.path.join(BUILD, "lib", "attrcheck", "mpi-build.json")) as f:
    LIBRARY = json.load(f)["library"]
# (With the transports the tests leave out, tests/mpi_config.py: Open MPI starts ranks faster
# without their probes, and nothing else differs.)
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", BUILD_DIR=BUILD,
           **{k: mpi_config.ENV[k] for k in ("OMPI_MCA_btl", "OMPI_MCA_mtl")})
NUMBER = r"-?[0-9][0-9,]*(?:\.[0-9]+)?"
PER_CALL = [f"{op} [{c}]" for op in ("get", "set", "set+delete", "dup+free (64 attrs)", "keyval create+free")
            for c in ("user", "predefined")]


class Skip(Exception):
    pass


def fail(why, output=""):
    sys.exit(f"FAIL: {why}\n--- output\n{output[-6000:]}")


def run(cmd, timeout=900, **env):
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, env=dict(ENV, **env), capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    print(f"$ {' '.join(f'{k}={v}' for k, v in env.items())} {' '.join(cmd)}: exit {p.returncode}, "
          f"{time.monotonic() - start:.1f} s")
    if p.returncode != 0:
        what = next((c for c in cmd if c.endswith((".sh", ".py"))), cmd[0])
        fail(f"{os.path.relpath(what, ROOT) if os.path.isabs(what) else what} exited {p.returncode}", out)
    return p.stdout


def need_valgrind():
    for tool in ("valgrind", "callgrind_annotate"):
        if not shutil.which(tool):
            raise Skip(f"{tool} is not installed (apt-get install valgrind)")


def need(path, why):
    if not os.path.exists(path):
        raise Skip(f"{path} is missing: {why}")


def need_hdf5():
    need(os.path.join(BUILD, "tests", "real", "hdf5_ph5example"), "the real-client tests are off")


def rows(text, names, cells, where):
    """{name: [cells]} of the table lines starting with each name, each with `cells` numbers."""
    found = {}
    for line in text.splitlines():
        for name in names:
            if line.startswith(name + " ") and name not in found:
                values = line[len(name):].split()
                if len(values) != cells or not all(re.fullmatch(rf"\+?{NUMBER}[%x]?", v) for v in values):
                    fail(f"{where}: row {name!r} is not {cells} numbers: {line!r}", text)
                found[name] = values
    missing = [n for n in names if n not in found]
    if missing:
        fail(f"{where}: rows missing: {missing}", text)
    return found


def per_call_table(text, configs, where):
    table = rows(text, PER_CALL, len(configs) + len(configs) - 1, where)
    for name, values in table.items():
        if not all(float(v.replace(",", "")) > 0 for v in values):
            fail(f"{where}: {name}: a count or ratio is not positive: {values}", text)


def bench_callgrind():
    """bash scripts/bench-callgrind.sh (the README's per-call table), N = 128."""
    need_valgrind()
    out = run(["bash", "scripts/bench-callgrind.sh"], COUNT="128")
    if "N = 128" not in out.splitlines()[0]:
        fail("no header with N = 128", out)
    per_call_table(out, ["native", "shadow", "emulate"], "bench-callgrind")


def bench_callgrind_abi():
    """STANDARD_ABI=1 bash scripts/bench-callgrind.sh: the benchmark built for the MPI standard ABI,
    natively and under the standard ABI build, N = 128."""
    need_valgrind()
    need(os.path.join(BUILD, "bench", "mpi_attr_bench_abi"), "no MPI library here ships the standard ABI")
    out = run(["bash", "scripts/bench-callgrind.sh"], COUNT="128", STANDARD_ABI="1", CONFIGS="native shadow")
    if "N = 128" not in out.splitlines()[0] or "the MPI standard ABI" not in out.splitlines()[0]:
        fail("no header with N = 128 and the MPI standard ABI", out)
    per_call_table(out, ["native", "shadow"], "bench-callgrind (standard ABI)")


def bench_real_callgrind():
    """bash scripts/bench-real-callgrind.sh, on the shortest client (parallel HDF5's ph5example)."""
    need_valgrind()
    need_hdf5()
    out = run(["bash", "scripts/bench-real-callgrind.sh"], CLIENTS="hdf5")
    rows(out, ["hdf5"], 5, "bench-real-callgrind")  # native, shadow and its %, emulate and its %


def bench_real():
    """ROUNDS=1 PRELOAD=1 bash scripts/bench-real.sh, on ph5example and `true`."""
    need_hdf5()
    out = run(["bash", "scripts/bench-real.sh"], ROUNDS="1", PRELOAD="1", CLIENTS="hdf5 true")
    rows(out, ["hdf5", "true"], 5 + 4, "bench-real")  # 5 configurations, 4 ratios to native
    if not re.search(rf"^hdf5 +shadow {NUMBER}% emulate {NUMBER}% shadow-preload {NUMBER}% emulate-preload "
                     rf"{NUMBER}%$", out.replace("+", ""), re.M):
        fail("bench-real: no line of hdf5 beyond the fixed cost", out)


def bench_engine():
    """bash scripts/bench-engine.sh, one round."""
    out = run(["bash", "scripts/bench-engine.sh"], ROUNDS="1")
    for name in ("get (64 keys)", "set+delete", "dup+free, 64 attrs", "keyval create+free"):
        m = re.search(rf"^{re.escape(name)} +({NUMBER}) +({NUMBER}) +({NUMBER})", out, re.M)
        if not m or not all(float(x) > 0 for x in m.groups()):
            fail(f"bench-engine: no row {name!r} of three positive numbers", out)
    if not re.search(rf"^bytes per attribute +{NUMBER} ", out, re.M):
        fail("bench-engine: no bytes per attribute", out)


def bench_overhead():
    """bash scripts/bench-overhead.sh for this build: every part at its smallest (N = 128 and
    native against shadow under callgrind, one round, MPI_THREAD_MULTIPLE as the other thread
    level, ph5example and `true` as the whole programs)."""
    need_valgrind()
    env = dict(BUILDS=BUILD, COUNT="128", CONFIGS="native shadow", ROUNDS="1", THREADS="multiple",
               CLIENTS="hdf5 true")
    if not os.path.exists(os.path.join(BUILD, "tests", "real", "hdf5_ph5example")):
        env["SKIP"] = "real"
        print("the real-client tests are off: the whole-program part is left out")
    out = run(["bash", "scripts/bench-overhead.sh"], timeout=1800, **env)
    parts = re.split(r"^== .*$", out, flags=re.M)
    heads = re.findall(r"^== (.*)$", out, re.M)
    want = ["instructions per call (callgrind)", "time per call, 1 interleaved rounds",
            "MPI_THREAD_MULTIPLE: instructions per call (callgrind)",
            "MPI_THREAD_MULTIPLE: time per call, 1 interleaved rounds"]
    if [h.split(" ", 2)[2] for h in heads[:4]] != want:
        fail(f"bench-overhead: parts {heads}", out)
    per_call_table(parts[1], ["native", "shadow"], "bench-overhead, callgrind")
    rows(parts[2], PER_CALL, 4 + 3, "bench-overhead, time")
    per_call_table(parts[3], ["native", "shadow"], "bench-overhead, callgrind at MULTIPLE")
    rows(parts[4], PER_CALL, 4 + 3, "bench-overhead, time at MULTIPLE")
    if "SKIP" not in env:
        if heads[4:] != [f"whole program ({BUILD})"]:
            fail(f"bench-overhead: parts {heads}", out)
        rows(parts[5], ["hdf5", "true"], 3 + 2, "bench-overhead, whole program")


def soak_threads():
    """RUNS=1 bash scripts/soak-threads.sh, this build's library, a small churn (2 threads, 5 rounds)."""
    need(os.path.join(BUILD, "tests", "mpi", "case_thread_churn"), "the MPI tests are not built")
    out = run(["bash", "scripts/soak-threads.sh"], RUNS="1", THREADS="2", ROUNDS="5", LIBRARIES=LIBRARY)
    for mode in ("shadow", "emulate"):
        line = f"{LIBRARY} {mode}: 1 runs of 2 ranks x 2 threads x 5 rounds: 0 broken, 0 finding(s) at warning or error"
        if line not in out.splitlines():
            fail(f"soak-threads: no line {line!r}", out)


def sweep_petsc():
    """bash scripts/sweep-petsc.sh on one of PETSc's sys tests (its TEST block's options), 1 rank,
    both modes."""
    if subprocess.run(["pkg-config", "--exists", "petsc"]).returncode != 0:
        raise Skip("PETSc is not installed (pkg-config petsc)")
    prefix = subprocess.check_output(["pkg-config", "--variable=prefix", "petsc"], text=True).strip()
    need(os.path.join(prefix, "share", "petsc", "examples", "src", "sys", "tests", "ex5.c"),
         "PETSc's examples are not installed")
    scratch = os.path.join(BUILD, "tests", "scripts", "sweep-petsc")
    shutil.rmtree(scratch, ignore_errors=True)
    out = run(["bash", "scripts/sweep-petsc.sh", "--only", r"sys/tests/ex5\.c$", "--np", "1"], SCRATCH=scratch)
    if not re.search(r"^sys_t_ex5 +1 +ok +ok +ok +-$", out, re.M):
        fail("sweep-petsc: no row of sys_t_ex5 compared in both modes", out)
    if not re.search(r"^1 examples compared \(1 example x np, 2 checked runs\), 0 differing", out, re.M):
        fail("sweep-petsc: no summary of one example compared", out)
    with open(os.path.join(scratch, "sweep.json")) as f:
        sweep = json.load(f)
    [row] = sweep["rows"]
    if row["args"] != ["-unused_petsc_option_1", "-unused_petsc_option_2", "-get_an_integer", "10",
                       "-options_left", "no"]:
        fail(f"sweep-petsc: sys_t_ex5 not run with its TEST block's options: {row['args']}", out)
    for mode in ("shadow", "emulate"):
        r = row["runs"][mode]
        if (r["native_status"], r["status"], r["failures"]) != (0, 0, []):
            fail(f"sweep-petsc: {mode}: {r}", out)


def report_at_scale():
    """python3 bench/report_at_scale.py at 2 ranks, 0 and 1 findings per rank, one round."""
    out = run([sys.executable, "bench/report_at_scale.py", BUILD, "--ranks", "2", "--findings", "0,1",
               "--rounds", "1"])
    for findings in ("0", "1"):
        m = re.search(rf"^ +2 +{findings} +({NUMBER}) +({NUMBER}) +({NUMBER}) +({NUMBER}) +({NUMBER}) +({NUMBER})"
                      r" +(\d+) +(\d+) +(\d+) +(\d+)$", out, re.M)
        if not m:
            fail(f"report_at_scale: no row for 2 ranks, {findings} findings", out)
        times, files = [float(x) for x in m.groups()[:6]], [int(x) for x in m.groups()[6:]]
        created, left, sent, largest = files
        if not all(t > 0 for t in times) or left != 1 or created < 1 or sent <= 0 or largest <= 0:
            fail(f"report_at_scale: 2 ranks, {findings} findings: times {times}, created {created}, left {left}, "
                 f"bytes sent per rank {sent}, largest message {largest}", out)


def report_scale():
    """python3 bench/report_scale.py with 4 rank reports of 3 findings."""
    out = run([sys.executable, "bench/report_scale.py", BUILD, "--ranks", "4", "--findings", "3"])
    if not re.search(r"^merged  : 4 rank reports, 3 distinct findings, \d+ occurrences$", out, re.M):
        fail("report_scale: the merge does not hold the 4 ranks' 3 findings", out)
    for step in ("merge   ", "summary ", "summary "):
        if not re.search(rf"^{step}: +{NUMBER} s, +{NUMBER} s CPU, peak +{NUMBER} MiB", out, re.M):
            fail(f"report_scale: no {step.strip()} line", out)
    if len(re.findall(r"^summary : ", out, re.M)) != 2:
        fail("report_scale: not both summaries", out)


def launcher_cost():
    """python3 bench/launcher_cost.py, one pair: init in off mode, the demo in shadow mode."""
    for mode, program in (("off", "init"), ("shadow", "demo")):
        out = run([sys.executable, "bench/launcher_cost.py", BUILD, "--pairs", "1", "--mode", mode,
                   "--program", program])
        if not re.search(rf"^{program} --mode {mode}: mpirun {NUMBER} s, attrcheck {NUMBER} s, ratio {NUMBER}x, "
                         rf"\+-?{NUMBER} ms \(median of 1 interleaved pairs\)$", out, re.M):
            fail(f"launcher_cost: no line for {program} in {mode} mode", out)


def python_attr_bench():
    """python3 bench/python_attr_bench.py, one round of 100 calls."""
    python = next((line.split("=", 1)[1].strip() for line in open(os.path.join(BUILD, "CMakeCache.txt"))
                   if line.startswith("ATTRCHECK_REAL_PYTHON:")), "")
    if LIBRARY != "openmpi":
        raise Skip(f"mpi4py is built against Open MPI only (Debian's python3-mpi4py), this build is for {LIBRARY}")
    if not python or subprocess.run([python, "-c", "import mpi4py"]).returncode != 0:
        raise Skip("no Python with mpi4py (the real-client tests' ATTRCHECK_REAL_PYTHON)")
    out = run([sys.executable, "bench/python_attr_bench.py", BUILD, "--python", python, "--rounds", "1",
               "--count", "100"])
    table = rows(out, ["native", "shadow, no Python frames", "shadow", "emulate, no Python frames", "emulate"],
                 12, "python_attr_bench")
    for name, cells in table.items():
        if not all(float(c.rstrip("x")) > 0 for c in cells):
            fail(f"python_attr_bench: {name}: {cells}", out)


def install():
    """cmake --install BUILD --prefix PREFIX, the tree moved, and the demo checked from it."""
    with tempfile.TemporaryDirectory(prefix="attrcheck-install-") as tmp:
        run(["cmake", "--install", BUILD, "--prefix", os.path.join(tmp, "first")])
        prefix = os.path.join(tmp, "moved")
        os.rename(os.path.join(tmp, "first"), prefix)  # the installed tree can be moved
        for path in ("bin/attrcheck", "bin/attrcheck-report", "lib/libattrcheck.so",
                     "lib/attrcheck/attrcheck-report.schema.json", "lib/attrcheck/default.supp"):
            if not os.path.exists(os.path.join(prefix, path)):
                fail(f"install: {path} is not installed", "\n".join(glob.glob(prefix + "/**", recursive=True)))
        with open(os.path.join(BUILD, "lib", "attrcheck", "mpi-build.json")) as f:
            mpiexec = json.load(f)["mpiexec"] or "mpiexec"
        out_dir = os.path.join(tmp, "out")
        p = subprocess.run([os.path.join(prefix, "bin", "attrcheck"), "--output", out_dir, "--", mpiexec, "-n", "2",
                            os.path.join(BUILD, "examples", "demo")], env=ENV, capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 1 or "demo: done" not in p.stdout:  # the demo's seeded errors fail the gate
            fail(f"install: the demo under the installed launcher exited {p.returncode}", p.stdout + p.stderr)
        sys.path.insert(0, os.path.dirname(HERE))
        import report_files
        problems, _ = report_files.ran(os.path.join(out_dir, "report.json"), 2, "shadow")
        if problems:
            fail("install: " + "; ".join(problems), p.stdout + p.stderr)
        summary = run([os.path.join(prefix, "bin", "attrcheck-report"), "summary", os.path.join(out_dir, "report.json")])
        if "keyval.double-free" not in summary:
            fail("install: the installed attrcheck-report's summary has no keyval.double-free", summary)


def main():
    name = sys.argv[2]
    start = time.monotonic()
    try:
        globals()[name.replace("-", "_")]()
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP
    print(f"ok: {name} ({time.monotonic() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
