#!/usr/bin/env python3
"""Thread soak: runs tests/mpi/cases/thread_churn.c (every thread creating and freeing keyvals,
communicators and datatypes with attributes at MPI_THREAD_MULTIPLE) many times, under attrcheck in
each mode and natively, and counts what went wrong. Not a test (it reports numbers; nothing here
has a time limit): scripts/soak-threads.sh runs it over every built library.

A run is broken when the program does not end with status 0 and its "churn: ok" line (a call
refused, an answer wrong, a callback count off, an abort), or when its report does not show every
rank finalized in the mode with its calls intercepted (report_files.ran). A finding is any
merged-report finding at warning or error level; library notes (library.divergence, info) are
counted apart.

usage: soak_threads.py --build DIR [--standard-abi] [--runs N] [--threads T] [--rounds R] [--np P] [--modes shadow,emulate,native]
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mpi_config  # noqa: E402
import report_files  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--modes", default="shadow,emulate")
    ap.add_argument("--keep", help="directory for the output of broken runs (default: a temporary one)")
    ap.add_argument("--standard-abi", action="store_true",
                    help="the program built for the MPI standard ABI, on the build's library's libmpi_abi")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    cfg = mpi_config.load(a.build)
    exe = os.path.join(a.build, "tests", "mpi", "abi_case_thread_churn" if a.standard_abi else "case_thread_churn")
    launcher = os.path.join(a.build, "bin", "attrcheck")
    keep = a.keep or tempfile.mkdtemp(prefix="attrcheck-soak-")
    extra = {}
    if a.standard_abi:
        cfg.for_standard_abi()
        extra = cfg.standard_abi_env(os.path.join(keep, "libmpi_abi"))
    env = cfg.env(CHURN_THREADS=str(a.threads), CHURN_ROUNDS=str(a.rounds), **extra)
    name = f"{cfg.library} (the MPI standard ABI)" if a.standard_abi else cfg.library
    failed = False
    for mode in a.modes.split(","):
        broken, findings, notes = 0, collections.Counter(), collections.Counter()
        for i in range(a.runs):
            work = tempfile.mkdtemp(prefix=f"soak-{mode}-")
            out = os.path.join(work, "out")
            cmd = cfg.mpiexec(a.np, exe)
            if mode != "native":
                cmd = [launcher, "--mode", mode, "--output", out, "--fail-on", "never", "--"] + cmd
            try:
                p = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True, timeout=600)
                ok = p.returncode == 0 and "churn: ok" in p.stdout
                text = f"$ {' '.join(cmd)}\nstatus {p.returncode}\n--- stdout\n{p.stdout}\n--- stderr\n{p.stderr}"
            except subprocess.TimeoutExpired as e:
                ok, text = False, f"$ {' '.join(cmd)}\ntimed out after 600 s\n{e.stdout}\n{e.stderr}"
            seen = []
            if mode != "native":
                problems, _ = report_files.ran(os.path.join(out, "report.json"), a.np, mode)
                if problems:  # attrcheck did not check the run: broken
                    ok, text = False, text + "\n" + "\n".join(problems)
                try:
                    with open(os.path.join(out, "report.json")) as f:
                        report = json.load(f)
                    for f_ in report.get("findings", []):
                        key = f"{f_['severity']} {f_['rule']}: {f_['message'][:160]}"
                        if f_["rule"] == "library.divergence":
                            notes[key] += f_.get("count", 1)
                        elif f_["severity"] in ("error", "warning"):
                            findings[key] += 1
                            seen.append(key)
                except (OSError, ValueError) as e:
                    ok, text = False, text + f"\nno merged report: {e}"
            if not ok or seen:
                broken += not ok
                dest = os.path.join(keep, f"{cfg.library}{'-abi' if a.standard_abi else ''}-{mode}-{i}")
                shutil.copytree(work, dest, dirs_exist_ok=True)
                with open(os.path.join(dest, "run.txt"), "w") as f:
                    f.write(text)
            shutil.rmtree(work, ignore_errors=True)
        runs_with = sum(findings.values())
        print(f"{name} {mode}: {a.runs} runs of {a.np} ranks x {a.threads} threads x {a.rounds} rounds: "
              f"{broken} broken, {runs_with} finding(s) at warning or error")
        for key, n in findings.most_common():
            print(f"  finding in {n} run(s): {key}")
        for key, n in notes.most_common():
            print(f"  library note (seen {n} times in all): {key}")
        if broken or runs_with:
            print(f"  evidence kept in {keep}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
