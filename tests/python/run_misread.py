#!/usr/bin/env python3
"""Runs tests/python/frames_app.py (an mpi4py program) under the attrcheck launcher with a wrong
row for reading frames without the GIL (ATTRCHECK_PYTHON_FRAMES=misread, for testing: every
offset of this version's RawFrames row in src/runtime/python/python_profile.hpp 8 bytes off), and
checks that the row is refused, safely: the program ends as natively, its findings are all there,
calls made holding the GIL still have their Python frames, the communicator made by Comm.Dup
(without the GIL) has none, and the report has one tool.python-frames note saying so.

usage: run_misread.py --build DIR --mode MODE --python PYTHON --workdir DIR
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
FRAMES = "misread"  # ATTRCHECK_PYTHON_FRAMES
from run_frames import run_app_as  # noqa: E402


def main():
    p, report, version, expected = run_app_as(FRAMES, __doc__)
    failures = []
    if p.returncode != 0:
        failures.append(f"exit status {p.returncode}")
    findings = report.get("findings", [])
    stacks = {s["id"]: s.get("frames", []) for s in report.get("stacks", [])}
    got = {}
    for f in findings:
        if f["severity"] in ("error", "warning"):
            got[f["rule"]] = got.get(f["rule"], 0) + 1
    for rule, n in expected.items():
        if got.get(rule) != n:
            failures.append(f"{n} {rule} findings expected, got {got.get(rule)} (all: {got})")
    notes = [f for f in findings if f["rule"] == "tool.python-frames"]
    if (len(notes) != 1 or f"Python {version}:" not in notes[0]["message"]
            or "without the GIL" not in notes[0]["message"] or "not used" not in notes[0]["message"]):
        failures.append(f"expected one tool.python-frames note on calls without the GIL, got {notes}")
    held = [f for f in findings if f["rule"] == "keyval.double-free" and f.get("site", {}).get("python")]
    if not held:
        failures.append("the double free (made holding the GIL) has no Python site")
    for f in [f for f in findings if f["rule"] == "attr.leak"]:
        for prov in f.get("provenance", []):
            if prov.get("what") == "object created" and any(fr.get("python") for fr in stacks.get(prov.get("stack"), [])):
                failures.append(f"'object created' (Comm.Dup, without the GIL) has Python frames: {stacks[prov['stack']]}")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
