#!/usr/bin/env python3
"""The PETSc sweep: many of PETSc's own examples under attrcheck (Open MPI), the first promise
(no false positive on real software) checked wider than the ctest `real` suite's six tutorials.

For each example of the set (below: every sys test and tutorial, plus a spread of vec, mat, ksp,
snes, ts, tao and dm tutorials) it
  - builds it against `pkg-config petsc` in the scratch directory (Debian's examples are sources),
  - takes its options from its own /*TEST ... TEST*/ block: the first test there whose `requires:`
    this PETSc meets and that needs no input file (`localrunfiles:`, `${DATAFILESPATH}`...),
  - runs it with tests/real/run_real.py (natively and under bin/attrcheck, compared: exit status,
    each rank's stdout, error and warning findings against tests/real/allow/petsc.txt) in shadow
    and emulate mode at 1 and 2 ranks.
An example whose native run fails (it needs more ranks, an input, a display) is dropped at that
size, not compared. Prints one table and writes it, with each run's failures, to SCRATCH/sweep.json.

usage: sweep_petsc.py --build DIR [--scratch DIR] [--only REGEX] [--np 1,2] [--modes shadow,emulate]
                      [--jobs N] [--list]
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUN_REAL = os.path.join(HERE, "run_real.py")
ALLOW = os.path.join(HERE, "allow", "petsc.txt")

# Beyond src/sys (all of it but the web clients and X drawing): tutorials that exercise the other
# classes on communicators PETSc dups (Vec/IS/SF, Mat, KSP/PC with sub-solvers, SNES, TS, TAO,
# DMDA/DMStag/DMPlex), whose first runnable TEST block takes seconds, and which the ctest `real`
# suite does not run already. Paths under share/petsc/examples/src, without ".c".
SPREAD = [
    "vec/vec/tutorials/ex11", "vec/vec/tutorials/ex18", "vec/is/is/tutorials/ex1", "vec/is/sf/tutorials/ex1",
    "mat/tutorials/ex9",
    "ksp/ksp/tutorials/ex5", "ksp/ksp/tutorials/ex7", "ksp/ksp/tutorials/ex9", "ksp/pc/tutorials/ex1",
    "snes/tutorials/ex3", "snes/tutorials/ex14", "snes/tutorials/ex48",
    "ts/tutorials/ex9", "ts/tutorials/ex15",
    "tao/unconstrained/tutorials/eptorsion2", "tao/bound/tutorials/plate2",
    "dm/tutorials/ex3", "dm/tutorials/ex7", "dm/tutorials/ex15", "dm/impls/stag/tutorials/ex1",
    "dm/impls/plex/tutorials/ex7", "dm/impls/plex/tutorials/ex14",
]
SYS_SKIP = re.compile(r"^sys/(webclient|classes/draw)/")

# Output that differs from run to run natively (so between the native and the checked run), per
# example: ("ignore", regex of lines to drop) or ("mask", regex of text to mask), with why. Each is
# what the example's own TEST `filter:` takes out for PETSc's harness, narrowed where it can be.
CWD = ("mask", r"/\S*/(native|attrcheck)(?=/)", "the run's directory (its filter: sed s?$(pwd -P)??g)")
HANDLE = ("mask", r"\b\d{9,}\b", "communicator handles (Open MPI's are addresses; its filter: wc -l)")
NORMALIZE = {
    "sys_t_ex31": [CWD],
    "sys_t_ex42": [("mask", r"(add|has|del): \S+", "timings (its filter takes the line's timings out)")],
    "sys_t_ex43": [("mask", r"(add|has|del): \S+", "timings (its filter takes the line's timings out)")],
    "sys_t_ex52": [("ignore", r"per unique value took|Speedup of ", "timings (its filter: the same grep -v)")],
    "sys_t_ex57": [HANDLE],
    # PETSc 3.22's log handler examples and tests (not in 3.18): -log_view and event timings.
    "sys_t_ex68": [("ignore", r"^(?!.*(External runtime initialization|Unrelated event))",
                    "the -log_view summary (its filter: grep -o of the two names it looks for)"),
                   ("mask", r"^.*?(?=External runtime initialization|Unrelated event)", "the same, left of the name"),
                   ("mask", r"(?<=Unrelated event).*$", "the same: the event's timings"),
                   ("mask", r"(?<=External runtime initialization).*$", "the same: the stage's timings")],
    "sys_t_ex72": [("mask", r" [0-9]+", "the flame graph's times (its filter: sed s/ [0-9]+/ time_removed/g)")],
    "sys_ex6": [("mask", r":[^:]+:", "the log handler's time stamps (its filter: sed s/:[^:]+:/:time_removed:/g)")],
    "sys_ex7": [("mask", r":[^:]+:", "the log handler's time stamps (its filter: sed s/:[^:]+:/:time_removed:/g)"),
                ("mask", r"(?<=took )\S+(?= seconds)|(?<=Created at )\S+",
                 "two timings its filter leaves in (they differ from one native run to the next as well)")],
}
# Examples that are no MPI programs (attrcheck has nothing to check, writes no report).
NOT_MPI = {"sys/tests/ex15.c": "uses petscsystypes.h only, never initializes MPI"}

KEYS = {"test", "testset", "build", "args", "requires", "nsize", "suffix", "filter", "filter_output",
        "output_file", "localrunfiles", "TODO", "env", "diff_args", "timeoutfactor", "temporaries",
        "comment"}


def petsc():
    prefix = subprocess.check_output(["pkg-config", "--variable=prefix", "petsc"], text=True).strip()
    flags = shlex.split(subprocess.check_output(["pkg-config", "--cflags", "--libs", "petsc"], text=True))
    defines = set()
    with open(os.path.join(prefix, "include", "petscconf.h")) as f:
        for line in f:
            m = re.match(r"\s*#define\s+(\w+)", line)
            if m:
                defines.add(m.group(1))
    return prefix, flags, defines


def parse_tests(source):
    """[(build requires, {key: value})] of the source's TEST block, one dict per test (a testset's
    keys inherited; args and requires concatenated), in order."""
    text = open(source, errors="replace").read()
    m = re.search(r"/\*TEST(.*?)TEST\*/", text, re.S)
    if not m:
        return None, []
    blocks, stack = [], []  # block: {"kind", "indent", "keys", "parent", "children"}
    last = None
    for line in m.group(1).splitlines():
        if not line.strip() or line.strip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        km = re.match(r"\s*(\w+):\s*(.*)$", line)
        if not km or km.group(1) not in KEYS:
            if last is not None:  # a multi-line value
                last[0][last[1]][-1] += "\n" + line
            continue
        key, value = km.group(1), km.group(2).strip()
        if key in ("test", "testset", "build"):
            while stack and stack[-1]["indent"] >= indent:
                stack.pop()
            b = {"kind": key, "indent": indent, "keys": {}, "parent": stack[-1] if stack else None, "children": []}
            if b["parent"]:
                b["parent"]["children"].append(b)
            blocks.append(b)
            stack.append(b)
            last = None
            continue
        if not stack:
            continue
        stack[-1]["keys"].setdefault(key, []).append(value)
        last = (stack[-1]["keys"], key)
    build_requires = " ".join(v for b in blocks if b["kind"] == "build" for v in b["keys"].get("requires", []))
    tests = []
    for b in blocks:
        if b["kind"] == "build" or b["children"]:
            continue
        chain, p = [], b
        while p:
            chain.insert(0, p)
            p = p["parent"]
        t = {}
        for c in chain:
            for k, v in c["keys"].items():
                if k in ("args", "requires", "env", "localrunfiles"):
                    t[k] = (t.get(k, "") + " " + " ".join(v)).strip()
                else:
                    t[k] = " ".join(v)
        tests.append(t)
    return build_requires, tests


def meets(requires, defines):
    """Whether this PETSc meets a `requires:` line (all its terms; `!` negates)."""
    for term in requires.split():
        neg = term.startswith("!")
        name = term.lstrip("!")
        d = re.fullmatch(r"defined\((\w+)\)", name)
        if d:
            have = d.group(1) in defines
        elif name == "complex":
            have = "PETSC_USE_COMPLEX" in defines
        elif name == "real":
            have = "PETSC_USE_COMPLEX" not in defines
        elif name in ("double", "single", "__float128", "__fp16"):
            have = f"PETSC_USE_REAL_{name.upper().lstrip('_')}" in defines or \
                f"PETSC_USE_REAL_{name.upper()}" in defines
        elif name in ("datafilespath", "x", "saws", "defined"):
            have = False  # no data files, no display, no SAWs here
        else:
            have = f"PETSC_HAVE_{name.upper()}" in defines
        if have == neg:
            return False
    return True


def first_args(t):
    """The test's arguments as a list ({{a b}} loops: the first value), or a reason it cannot run."""
    if "TODO" in t:
        return None, "TODO: " + t["TODO"][:60]
    if t.get("localrunfiles"):
        return None, "input files: " + t["localrunfiles"]
    if t.get("env"):
        return None, "environment: " + t["env"]
    args = t.get("args", "").replace("\\\n", " ")  # a continued line
    args = re.sub(r"\{\{(.*?)\}[^}]*\}", lambda m: m.group(1).split()[0] if m.group(1).split() else "",
                  args)
    if "$" in args or "`" in args:
        return None, "needs files or shell: " + args[:60]
    try:
        return shlex.split(args), None
    except ValueError as e:
        return None, f"args: {e}"


def choose(prefix, defines, only):
    """[(name, source, args)] of the examples to run, and [(name, why)] of those left out."""
    src = os.path.join(prefix, "share", "petsc", "examples", "src")
    paths = []
    for dirpath, _, files in sorted(os.walk(os.path.join(src, "sys"))):
        rel = os.path.relpath(dirpath, src)
        if not re.search(r"/(tests|tutorials)$", rel) or SYS_SKIP.match(rel + "/"):
            continue
        paths += sorted((os.path.join(rel, f) for f in files if re.fullmatch(r"ex\d+\.(c|cxx)", f)),
                        key=lambda p: (os.path.dirname(p), int(re.search(r"\d+", os.path.basename(p)).group())))
    paths += [p + ".c" for p in SPREAD]
    chosen, left = [], []
    for rel in paths:
        name = re.sub(r"\.(c|cxx)$", "", rel).replace("/tutorials/", "/").replace("/tests/", "/t/")
        name = name.replace("/", "_")
        if only and not re.search(only, rel):
            continue
        if rel in NOT_MPI:
            left.append((name, NOT_MPI[rel]))
            continue
        source = os.path.join(src, rel)
        build_requires, tests = parse_tests(source)
        if build_requires is None:  # not in PETSc's test harness: run as it is, if it builds and runs
            chosen.append((name, source, []))
            continue
        if not meets(build_requires, defines):
            left.append((name, "build requires: " + build_requires))
            continue
        why = "no test"
        for t in tests:
            if not meets(t.get("requires", ""), defines):
                why = "requires: " + t["requires"]
                continue
            args, why = first_args(t)
            if args is not None:
                chosen.append((name, source, args))
                break
        else:
            left.append((name, why))
    return chosen, left


def build(name, source, flags, bindir):
    exe = os.path.join(bindir, name)
    if os.path.exists(exe) and os.path.getmtime(exe) > os.path.getmtime(source):
        return exe, None
    cc = "mpicxx" if source.endswith(".cxx") else "mpicc"
    p = subprocess.run([cc, "-w", "-O1", "-o", exe, source, *flags, "-lm"], capture_output=True, text=True)
    return (exe, None) if p.returncode == 0 else (None, p.stderr.strip().splitlines()[-1:] or ["?"])


def run(build_dir, exe, args, np, mode, workdir, timeout, ignore):
    result = os.path.join(workdir + ".json")
    cmd = [sys.executable, RUN_REAL, "--build", build_dir, "--mode", mode, "--np", str(np), "--allow", ALLOW,
           "--workdir", workdir, "--timeout", str(timeout), "--result", result]
    for kind, regex, _ in ignore:
        cmd += [f"--{kind}", regex]
    start = time.time()
    p = subprocess.run(cmd + ["--", exe, *args], capture_output=True, text=True)
    try:
        with open(result) as f:
            r = json.load(f)
    except (OSError, ValueError):
        r = {"native_status": None, "status": None, "failures": [f"run_real.py: {p.returncode}: {p.stderr[-500:]}"],
             "findings": {}}
    r["seconds"] = round(time.time() - start, 1)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the attrcheck build (Open MPI)")
    ap.add_argument("--scratch", default="/tmp/attrcheck-sweep-petsc")
    ap.add_argument("--only", help="regex of example paths to keep")
    ap.add_argument("--np", default="1,2")
    ap.add_argument("--modes", default="shadow,emulate")
    ap.add_argument("--jobs", type=int, default=2, help="parallel compilations")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per run")
    ap.add_argument("--list", action="store_true", help="print the chosen examples and their options, run nothing")
    a = ap.parse_args()
    build_dir = os.path.abspath(a.build)
    prefix, flags, defines = petsc()
    chosen, left = choose(prefix, defines, a.only)
    if a.list:
        for name, source, args in chosen:
            print(f"{name:28} {' '.join(args)}")
        for name, why in left:
            print(f"{name:28} -- left out: {why}")
        return 0
    bindir = os.path.join(a.scratch, "bin")
    os.makedirs(bindir, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        built = list(pool.map(lambda c: build(c[0], c[1], flags, bindir), chosen))
    rows, nps, modes = [], [int(n) for n in a.np.split(",")], a.modes.split(",")
    start = time.time()
    for (name, source, args), (exe, error) in zip(chosen, built):
        if not exe:
            left.append((name, f"does not build: {error[0][:80]}"))
            continue
        for np in nps:
            row = {"example": name, "args": args, "np": np, "runs": {}}
            for mode in modes:
                r = run(build_dir, exe, args, np, mode, os.path.join(a.scratch, "run", f"{name}.np{np}.{mode}"),
                        a.timeout, NORMALIZE.get(name, []))
                row["runs"][mode] = r
                row["native"] = r["native_status"]
                if r["native_status"] != 0:
                    break  # dropped at this size: nothing to compare
            rows.append(row)
            print(format_row(row, modes), flush=True)
    elapsed = time.time() - start
    summary(rows, left, modes, elapsed)
    with open(os.path.join(a.scratch, "sweep.json"), "w") as f:
        json.dump({"rows": rows, "left_out": left, "seconds": round(elapsed)}, f, indent=1)
    return 1 if any(verdict(r["runs"].get(m)) == "DIFF" for r in rows for m in modes) else 0


def verdict(r):
    if r is None:
        return "-"
    if r["native_status"] != 0:
        return "dropped"
    return "ok" if not r["failures"] else "DIFF"


def format_row(row, modes):
    findings = {}
    for m in modes:
        for rule, n in (row["runs"].get(m) or {}).get("findings", {}).items():
            findings[f"{m[0]}:{rule}"] = n
    native = row["native"]
    return (f"{row['example']:28} {row['np']:>2}  {('ok' if native == 0 else str(native))[:12]:12} "
            + " ".join(f"{verdict(row['runs'].get(m)):8}" for m in modes) + " "
            + (", ".join(f"{k} x{v}" for k, v in sorted(findings.items())) or "-"))


def summary(rows, left, modes, elapsed):
    print()
    print(f"{'example':28} np  {'native':12} " + " ".join(f"{m:8}" for m in modes) + " findings (mode:rule xcount)")
    for row in rows:
        print(format_row(row, modes))
    compared = [r for r in rows if r["native"] == 0]
    examples = {r["example"] for r in compared}
    diffs = [(r, m) for r in compared for m in modes if verdict(r["runs"].get(m)) == "DIFF"]
    print(f"\n{len(examples)} examples compared ({len(compared)} example x np, "
          f"{sum(1 for r in compared for m in modes if m in r['runs'])} checked runs), "
          f"{len(diffs)} differing, {len({r['example'] for r in rows} - examples)} dropped at every size, "
          f"{len(left)} left out; {elapsed:.0f} s")
    for r, m in diffs:
        print(f"DIFF {r['example']} np{r['np']} {m}:")
        for f in r["runs"][m]["failures"]:
            print("   " + f.replace("\n", "\n   ")[:1500])
    dropped = [r for r in rows if r["native"] != 0]
    for r in dropped:
        run = next(iter(r["runs"].values()))
        errors = [line.split("ERROR:", 1)[1].strip() for line in run.get("native_stderr", "").splitlines()
                  if "PETSC ERROR:" in line and not re.search(r"-{5}|#\d|Option Table|See https|Petsc Release|"
                                                              r"Configure options|on a .* named|^\s*$", line.split("ERROR:", 1)[1])]
        print(f"dropped {r['example']} np{r['np']}: native status {r['native']}" + (f": {errors[0][:100]}" if errors else ""))
    for name, why in left:
        print(f"left out {name}: {why}")


if __name__ == "__main__":
    sys.exit(main())
