#!/usr/bin/env python3
"""Runs tests/python/frames_app.py (an mpi4py program) under the attrcheck launcher as if its Python
were one whose frames attrcheck does not read (ATTRCHECK_PYTHON_FRAMES=unlisted, for testing: the
version is taken as unlisted in src/runtime/python/python_profile.hpp), and checks that the run is
checked as before, without Python frames: the program ends as natively, its findings are all
there (at native frames), no stack has a Python frame, and the report has one tool.python-frames
note naming the version.

usage: run_unlisted.py --build DIR --mode MODE --python PYTHON --workdir DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import mpi_config  # noqa: E402
from run_frames import APP, EXPECTED  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--mode", required=True, choices=("shadow", "emulate"))
    ap.add_argument("--python", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    version = subprocess.run([a.python, "-c", "import sys, mpi4py; print(mpi4py.__version__, '%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.split()
    expected = dict(EXPECTED)
    if int(version[0].split(".")[0]) >= 4:  # as run_frames.py: one callback.error from mpi4py 4 on
        expected["callback.error"] -= 1
    cfg = mpi_config.load(a.build)
    env = cfg.env(ATTRCHECK_PYTHON_FRAMES="unlisted")
    env.pop("ATTRCHECK_SUPPRESSIONS", None)
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    out = os.path.join(a.workdir, "report")
    launcher = os.path.join(os.path.abspath(a.build), "bin", "attrcheck")
    cmd = [launcher, "--mode", a.mode, "--output", out, "--fail-on", "never", "--"] + cfg.mpiexec(1, a.python, APP)
    p = subprocess.run(cmd, env=env, cwd=a.workdir, capture_output=True, text=True, timeout=240)
    print("$ " + " ".join(cmd))
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    failures = []
    if p.returncode != 0:
        failures.append(f"exit status {p.returncode}")
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    findings = report.get("findings", [])
    got = {}
    for f in findings:
        if f["severity"] in ("error", "warning"):
            got[f["rule"]] = got.get(f["rule"], 0) + 1
    # Without Python frames, findings that only their Python lines told apart may merge.
    for rule in expected:
        if not got.get(rule):
            failures.append(f"no {rule} finding (got {got})")
    notes = [f for f in findings if f["rule"] == "tool.python-frames"]
    if len(notes) != 1 or f"Python {version[1]}:" not in notes[0]["message"] or notes[0]["severity"] != "info":
        failures.append(f"expected one tool.python-frames note naming Python {version[1]}, got {notes}")
    python_frames = [fr for s in report.get("stacks", []) for fr in s.get("frames", []) if fr.get("python")]
    python_frames += [f["site"]["python"] for f in findings if f.get("site", {}).get("python")]
    if python_frames:
        failures.append(f"Python frames in the report: {python_frames[:3]}")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
