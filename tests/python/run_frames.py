#!/usr/bin/env python3
"""Runs tests/python/frames_app.py (an mpi4py program) under the attrcheck launcher and checks that
its findings name the Python lines marked in it (see the program's docstring for the markers):
the findings' sites and their provenance, in the merged report, in the summary the report tool
prints, its SARIF and its JUnit; and that suppressions match its Python frames (fun: a function,
src: a .py file).

It fails when a marked finding is missing or at another line, when a rule is reported other than
the program's, or when a call the program expects to fail succeeds (its exit status).

usage: run_frames.py --build DIR --mode MODE --python PYTHON --workdir DIR [--np N]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "mpi"))
import mpi_config  # noqa: E402
from run_case import schema_errors  # noqa: E402

APP = os.path.join(HERE, "frames_app.py")
# Every finding the program makes: rule -> how many distinct findings (a raising delete and a
# raising copy callback are two callback.error findings before mpi4py 4, one from it; three leaked
# keyvals, one made in another thread, three keyval.leak).
EXPECTED = {"keyval.leak": 3, "keyval.double-free": 1, "callback.error": 2, "keyval.kind-mismatch": 1,
            "attr.leak": 1}
MARKER = re.compile(r"^\s*expect-(site|provenance|where):\s*(\S+)\s*(.*?)\s*(\[mpi4py<(\d+)\])?\s*$")


def run_app_as(frames_setting, description):
    """Runs the program once, under the attrcheck launcher, with ATTRCHECK_PYTHON_FRAMES set to
    `frames_setting` (a testing switch), for the run_*.py checks beside this one: parses their
    command line (DESCRIPTION for --help), returns (completed process, its merged report, the
    Python version "3.X", the rule counts expected with this mpi4py)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--build", required=True)
    ap.add_argument("--mode", required=True, choices=("shadow", "emulate"))
    ap.add_argument("--python", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    version = subprocess.run([a.python, "-c", "import sys, mpi4py; print(mpi4py.__version__, '%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.split()
    expected = dict(EXPECTED)
    if int(version[0].split(".")[0]) >= 4:  # one callback.error from mpi4py 4 on (main)
        expected["callback.error"] -= 1
    cfg = mpi_config.load(a.build)
    env = cfg.env(ATTRCHECK_PYTHON_FRAMES=frames_setting)
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
    with open(os.path.join(out, "report.json")) as f:
        report = json.load(f)
    return p, report, version[1], expected


def markers(mpi4py_major):
    """[(kind, rule, what, line)] from the program's comments (markers separated by ';'), those
    that hold for this mpi4py."""
    out = []
    with open(APP, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if "# expect-" not in line:
                continue
            for part in line.split("# ", 1)[1].split(";"):
                m = MARKER.match(part)
                if m and (m.group(5) is None or mpi4py_major < int(m.group(5))):
                    out.append((m.group(1), m.group(2), m.group(3), number))
    return out


def user_python(frames):
    """The first frame of the user's Python code (as the report tool trims: not mpi4py's package,
    the import machinery or runpy), or None."""
    for fr in frames:
        if fr.get("python") and "/mpi4py/" not in fr["file"] and not fr["file"].startswith("<frozen ") \
                and os.path.basename(fr["file"]) != "runpy.py":
            return fr
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--mode", required=True, choices=("shadow", "emulate"))
    ap.add_argument("--python", required=True, help="the Python that has mpi4py")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--np", type=int, default=1)
    a = ap.parse_args()
    version = subprocess.run([a.python, "-c", "import mpi4py; print(mpi4py.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    mpi4py_major = int(version.split(".")[0])
    expected = dict(EXPECTED)
    if mpi4py_major >= 4:  # a raising delete callback is no failure to MPI (frames_app.py)
        expected["callback.error"] -= 1
    cfg = mpi_config.load(a.build)
    env = cfg.env()
    env.pop("ATTRCHECK_SUPPRESSIONS", None)
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    out = os.path.join(a.workdir, "report")
    launcher = os.path.join(os.path.abspath(a.build), "bin", "attrcheck")
    cmd = [launcher, "--mode", a.mode, "--output", out, "--fail-on", "never", "--"] + \
        cfg.mpiexec(a.np, a.python, APP)
    p = subprocess.run(cmd, env=env, cwd=a.workdir, capture_output=True, text=True, timeout=240)
    print("$ " + " ".join(cmd))
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    failures = []
    if p.returncode != 0:  # (the program exits non-zero when a call that must fail did not)
        failures.append(f"exit status {p.returncode}")
    report_path = os.path.join(out, "report.json")
    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        print(f"FAIL: {report_path}: {e}", file=sys.stderr)
        return 1
    failures.extend(schema_errors(report_path))
    stacks = {s["id"]: s["frames"] for s in report.get("stacks", [])}
    findings = report.get("findings", [])

    got = {}
    for f in findings:
        if f["severity"] in ("error", "warning"):
            got[f["rule"]] = got.get(f["rule"], 0) + 1
    if got != expected:
        failures.append(f"findings by rule {got}, expected {expected} (mpi4py {version})")

    def site_line(f):
        fr = user_python(stacks.get(f.get("stack"), []))
        if fr is None and f.get("site", {}).get("python"):
            fr = user_python([f["site"]["python"]])
        return fr

    for kind, rule, what, line in markers(mpi4py_major):
        candidates = [f for f in findings if f["rule"] == rule]
        if kind == "site":
            lines = []
            for f in candidates:
                fr = site_line(f)
                lines.append(fr and (os.path.basename(fr["file"]), fr["line"]))
            if ("frames_app.py", line) not in lines:
                failures.append(f"no {rule} finding at frames_app.py:{line} (sites: {lines})")
        elif kind == "provenance":
            lines = []
            for f in candidates:
                for prov in f.get("provenance", []):
                    if prov["what"] == what:
                        fr = user_python(stacks.get(prov.get("stack"), []))
                        lines.append(fr and (os.path.basename(fr["file"]), fr["line"]))
            if ("frames_app.py", line) not in lines:
                failures.append(f"no {rule} finding with '{what}' at frames_app.py:{line} (found: {lines})")

    # What people see: the summary's "where" column and provenance lines name the Python lines.
    tool = os.path.join(os.path.abspath(a.build), "bin", "attrcheck-report")
    summary = subprocess.run([tool, "summary", report_path], capture_output=True, text=True).stdout
    for kind, rule, what, line in markers(mpi4py_major):
        needle = f"frames_app.py:{line} in "
        if needle not in summary:
            failures.append(f"the summary does not name {needle!r} ({kind} {rule} {what})")
        # A finding's own row (severity, rule, count, ranks, where, message) is where it is shown.
        rows = [r for r in summary.splitlines() if re.match(rf"\s+(error|warning|info)\s+{re.escape(rule)}\s", r)]
        if kind == "where" and not any(needle in r for r in rows):
            failures.append(f"no {rule} row of the summary is at {needle!r} (rows: {rows})")
    # SARIF: a finding made from Python is at its .py file and line (a physical location).
    sarif_path = os.path.join(a.workdir, "report.sarif")
    subprocess.run([tool, "sarif", "--force", "-o", sarif_path, report_path], capture_output=True, text=True)
    with open(sarif_path) as f:
        sarif = json.load(f)
    sarif_lines = set()
    for r in sarif["runs"][0]["results"]:
        for loc in r.get("locations", []):
            phys = loc.get("physicalLocation")
            if phys:
                sarif_lines.add((r["ruleId"], os.path.basename(phys["artifactLocation"]["uri"]),
                                 phys["region"]["startLine"]))
    for kind, rule, what, line in markers(mpi4py_major):
        if kind in ("site", "where") and (rule, "frames_app.py", line) not in sarif_lines:
            failures.append(f"SARIF has no {rule} result at frames_app.py:{line}")

    # JUnit: each failure says where, at the Python line.
    junit_path = os.path.join(a.workdir, "report.xml")
    subprocess.run([tool, "junit", "--force", "-o", junit_path, report_path], capture_output=True, text=True)
    with open(junit_path) as f:
        junit = f.read()
    for kind, rule, what, line in markers(mpi4py_major):
        if kind in ("site", "where") and f"at frames_app.py:{line} in " not in junit:
            failures.append(f"JUnit names no finding at frames_app.py:{line} ({rule})")

    # Suppressions match Python frames: fun: a Python function, src: a .py file.
    supp = os.path.join(a.workdir, "python.supp")
    with open(supp, "w") as f:
        f.write("keyval.leak  fun:make_keyval  # the keyval made in the helper, not the other one\n"
                "keyval.kind-mismatch  src:*/frames_app.py  # a Python file\n")
    suppressed_path = os.path.join(a.workdir, "suppressed.json")
    subprocess.run([tool, "--suppressions", supp, "merge", "--force", "-o", suppressed_path, report_path],
                   capture_output=True, text=True)
    try:
        with open(suppressed_path) as f:
            left = {}
            for x in json.load(f).get("findings", []):
                left[x["rule"]] = left.get(x["rule"], 0) + 1
        want = dict(expected, **{"keyval.leak": expected["keyval.leak"] - 1})
        del want["keyval.kind-mismatch"]
        if left != want:
            failures.append(f"with fun:make_keyval and src:*/frames_app.py suppressed: {left}, expected {want}")
    except (OSError, ValueError) as e:
        failures.append(f"{suppressed_path}: {e}")

    if failures:
        print(summary, file=sys.stderr)
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        return 1
    print(summary)
    print(f"ok: Python frames [{a.mode}, np={a.np}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
