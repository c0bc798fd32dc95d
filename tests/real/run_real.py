#!/usr/bin/env python3
"""Runs a real MPI client natively and under the attrcheck launcher and compares the two runs.

The test passes when, under attrcheck in the given mode:
  - the command ends with the native run's exit status (which must be 0),
  - every rank's stdout equals the native run's (the launcher keeps one file per rank, so the
    interleaving of ranks does not matter: mpi_config.per_rank_command; lines matching an --ignore
    regex are dropped in both, text matching a --mask regex is replaced by "<masked>" in both:
    what differs from run to run natively, like timings or handle addresses),
  - every rank wrote a report (attrcheck really ran in it), the merged report matches the schema,
  - the merged report has no error or warning finding, except those the client's allow-list
    (--allow FILE) names. The allow-list is a suppressions file (README, Suppressions) given to
    the launcher, so allowed findings are moved to the report's "suppressed" list; every entry
    must say why on its own line as a trailing "# reason" comment.

usage: run_real.py --build DIR --mode MODE --np N --workdir DIR [--allow FILE]
                   [--ignore REGEX]... [--mask REGEX]... [--input FILE]... [--timeout SECONDS] [--result FILE]
                   -- COMMAND [ARGS...]
The command is what the build's MPI launcher (mpiexec of Open MPI or MPICH) starts on each rank
(a program and its arguments). Each run has a directory of its own as its working directory;
--input files are copied into both (clients that read their input from the working directory:
ScaLAPACK's test drivers read their .dat file there). --result writes the outcome as JSON for a
driver running many clients (tests/real/sweep_petsc.py): both exit statuses, the failures, the
findings by rule.
"""
import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "mpi"))
import mpi_config  # noqa: E402  (the MPI library of the build, the MPI tests' environment)
import report_files  # noqa: E402  (the merged report's ranks)
from run_case import schema_errors  # noqa: E402  (the MPI tests' schema check)

def per_rank(cfg, directory, ignore, mask=()):
    """{rank: [lines]} of each rank's stdout (the first job's) that the launcher wrote under
    `directory`, lines matching an `ignore` regex dropped, text matching a `mask` regex masked."""
    def masked(line):
        for r in mask:
            line = r.sub("<masked>", line)
        return line
    return {rank: [masked(line) for line in text.splitlines() if not any(r.search(line) for r in ignore)]
            for rank, text in cfg.rank_stdout(directory).items()}


def allow_list_problems(path, launcher):
    """An allow-list entry without its reason is a failure: every allowed finding is documented."""
    problems = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text, _, reason = line.partition("#")
            if text.strip() and not reason.strip():
                problems.append(f"{path}:{number}: allow-list entry without a '# reason': {text.strip()}")
    # The launcher reads it before it runs anything: a malformed line is its error, exit 2.
    with tempfile.TemporaryDirectory(prefix="attrcheck-allow-") as out:
        p = subprocess.run([launcher, "--mode", "off", "--suppressions", path, "--output", out, "--", "true"],
                           capture_output=True, text=True, timeout=60)
    if p.returncode == 2:
        problems.append(p.stderr.strip())
    return problems


def run(cmd, env, cwd, timeout):
    try:
        return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return subprocess.CompletedProcess(cmd, f"timeout after {timeout} s", out, err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the attrcheck build: its launcher (bin/attrcheck) and its MPI")
    ap.add_argument("--mode", required=True, choices=("shadow", "emulate"))
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--allow", help="allow-list (suppressions file) of documented true positives")
    ap.add_argument("--ignore", action="append", default=[], help="regex of stdout lines that may differ")
    ap.add_argument("--input", action="append", default=[], help="file copied into each run's working directory")
    ap.add_argument("--mask", action="append", default=[], help="regex of stdout text that may differ (masked)")
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--result", help="write the outcome here as JSON")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no command given")
    ignore = [re.compile(r) for r in a.ignore]
    mask = [re.compile(r) for r in a.mask]
    a.workdir = os.path.abspath(a.workdir)  # the runs use their own directories as cwd
    failures = []

    cfg = mpi_config.load(a.build)
    launcher_bin = os.path.join(os.path.abspath(a.build), "bin", "attrcheck")
    env = cfg.env()
    env.pop("ATTRCHECK_SUPPRESSIONS", None)  # only the allow-list given here may hide findings
    shutil.rmtree(a.workdir, ignore_errors=True)
    native_dir, checked_dir = os.path.join(a.workdir, "native"), os.path.join(a.workdir, "attrcheck")
    os.makedirs(native_dir)
    os.makedirs(checked_dir)  # each run in its own directory: clients write files to the cwd
    for path in a.input:
        for directory in (native_dir, checked_dir):
            shutil.copy(path, directory)
    out = os.path.join(a.workdir, "report")
    def mpirun(directory):
        return cfg.per_rank_command(os.path.join(directory, "stdout"), a.np, command)

    native = run(mpirun(native_dir), env, native_dir, a.timeout)
    launcher = [launcher_bin, "--mode", a.mode, "--output", out, "--fail-on", "never"]
    if a.allow:
        failures.extend(allow_list_problems(a.allow, launcher_bin))
        launcher += ["--suppressions", a.allow]
    checked_cmd = launcher + ["--"] + mpirun(checked_dir)
    checked = run(checked_cmd, env, checked_dir, a.timeout)
    print("$ " + " ".join(checked_cmd))
    print(checked.stdout)
    print(checked.stderr, file=sys.stderr)

    if native.returncode != 0:  # a client broken natively would make any comparison moot
        failures.append(f"the native run failed ({native.returncode}): {native.stderr[-2000:]}")
    if native.returncode != checked.returncode:
        failures.append(f"exit status {checked.returncode} under attrcheck, {native.returncode} natively")

    want = per_rank(cfg, os.path.join(native_dir, "stdout"), ignore, mask)
    got = per_rank(cfg, os.path.join(checked_dir, "stdout"), ignore, mask)
    # Under Open MPI every rank's file is made (by the shell that starts the rank: per_rank_command);
    # Hydra (MPICH) makes one only once its rank prints, so there a silent rank (ScaLAPACK's
    # drivers print on rank 0 only) leaves none: its stdout is empty. (That every rank ran shows in
    # the reports, checked below.)
    if (0 not in want or not set(want) <= set(range(a.np))
            or (cfg.library == "openmpi" and sorted(want) != list(range(a.np)))):
        failures.append(f"the native run left stdout files for ranks {sorted(want)}, expected {a.np}")
    for rank in sorted(set(want) | set(got)):
        if want.get(rank, []) != got.get(rank, []):
            diff = difflib.unified_diff(want.get(rank, []), got.get(rank, []), "native", "attrcheck",
                                        lineterm="", n=2)
            failures.append(f"rank {rank}: stdout differs from the native run:\n" + "\n".join(list(diff)[:60]))

    merged = {"findings": [], "ranks": [], "suppressed": []}
    try:
        with open(os.path.join(out, "report.json")) as f:
            merged = json.load(f)
        failures.extend(schema_errors(os.path.join(out, "report.json")))
    except (OSError, ValueError) as e:
        failures.append(f"{os.path.join(out, 'report.json')}: {e}")
    seen = sorted(rank for (_, rank), _ in report_files.rank_entries(merged))
    if seen != list(range(a.np)):
        failures.append(f"rank reports {seen}, expected one from each of {a.np} ranks (did attrcheck load?)")
    for f in merged.get("findings", []):
        if f["severity"] in ("error", "warning"):
            site = f.get("site") or {}
            where = site.get("function") or site.get("module") or "?"
            failures.append(f"{f['severity']} {f['rule']} x{f.get('count', 1)} at {where}: {f['message']}")
    for s in merged.get("suppressed", []):
        print(f"allowed: {s['rule']} x{s.get('count', 1)} ({s.get('suppression')}): {s.get('message')}")

    if a.result:
        by_rule = {}
        for f in merged.get("findings", []):
            key = f"{f['severity']}:{f['rule']}"
            by_rule[key] = by_rule.get(key, 0) + f.get("count", 1)
        for s in merged.get("suppressed", []):
            key = f"suppressed:{s['rule']}"
            by_rule[key] = by_rule.get(key, 0) + s.get("count", 1)
        with open(a.result, "w") as f:
            json.dump({"native_status": native.returncode, "status": checked.returncode, "failures": failures,
                       "findings": by_rule, "native_stderr": native.stderr[:3000],
                       "stderr": checked.stderr[-2000:]}, f, indent=1)

    if failures:
        print(json.dumps(merged.get("findings", []), indent=1)[:6000], file=sys.stderr)
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        return 1
    print(f"ok: {' '.join(command)} [{a.mode}, np={a.np}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
