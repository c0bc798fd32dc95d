#!/usr/bin/env python3
"""Runs tests/python/frames_app.py (an mpi4py program) under the attrcheck launcher as if its Python
were one whose frames attrcheck does not read (ATTRCHECK_PYTHON_FRAMES=unlisted, for testing: the
version is taken as unlisted in src/runtime/python/python_profile.hpp), and checks that the run is
checked as before, without Python frames: the program ends as natively, its findings are all
there (at native frames), no stack has a Python frame, and the report has one tool.python-frames
note naming the version.

usage: run_unlisted.py --build DIR --mode MODE --python PYTHON --workdir DIR
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
FRAMES = "unlisted"  # ATTRCHECK_PYTHON_FRAMES
from run_frames import run_app_as  # noqa: E402


def main():
    p, report, version, expected = run_app_as(FRAMES, __doc__)
    failures = []
    if p.returncode != 0:
        failures.append(f"exit status {p.returncode}")
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
    if len(notes) != 1 or f"Python {version}:" not in notes[0]["message"] or notes[0]["severity"] != "info":
        failures.append(f"expected one tool.python-frames note naming Python {version}, got {notes}")
    python_frames = [fr for s in report.get("stacks", []) for fr in s.get("frames", []) if fr.get("python")]
    python_frames += [f["site"]["python"] for f in findings if f.get("site", {}).get("python")]
    if python_frames:
        failures.append(f"Python frames in the report: {python_frames[:3]}")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
