#!/usr/bin/env python3
"""The RawFrames row src/runtime/python/python_profile.hpp holds for this machine's Python (the
offsets attrcheck reads a thread's frames by while it has released the GIL) is what
scripts/python-offsets.sh prints from that Python's own headers. Skipped (77) where the Python's
headers (python3-dev, the internal ones included) or a C compiler are missing.

usage: test_python_offsets.py PYTHON
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SKIP = 77


def main():
    python = sys.argv[1]
    probe = subprocess.run([python, "-c", "import sys, sysconfig; print('%d.%d' % sys.version_info[:2]); "
                            "print(sysconfig.get_paths()['include'])"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"SKIP: {python} does not run: {probe.stderr}")
        return SKIP
    version, include = probe.stdout.split("\n")[:2]
    if not os.path.isfile(os.path.join(include, "internal", "pycore_frame.h")) or not shutil.which("cc"):
        print(f"SKIP: no headers of Python {version} in {include} (python3-dev), or no C compiler")
        return SKIP
    with open(os.path.join(ROOT, "src", "runtime", "python", "python_profile.hpp")) as f:
        text = f.read()
    table = text[text.index("kRawFrames[]"):]
    table = table[:table.index("};")]
    major, minor = version.split(".")
    rows = [r for r in re.findall(r"\{[^{}]*\}", table)
            if (re.match(r"\{\s*(\d+),\s*(\d+),", r) or re.match("", "")).groups() == (major, minor)]
    p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "python-offsets.sh")], env=dict(os.environ, PYTHON=python),
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL: scripts/python-offsets.sh failed ({p.returncode}): {p.stderr}", file=sys.stderr)
        return 1
    printed = p.stdout.strip()
    norm = lambda r: re.sub(r"\s+", "", r)
    if not rows:
        print(f"FAIL: python_profile.hpp has no RawFrames row for Python {version}; its headers give {printed}",
              file=sys.stderr)
        return 1
    if norm(rows[0]) != norm(printed):
        print(f"FAIL: the row for Python {version} is {rows[0]}, its headers give {printed}", file=sys.stderr)
        return 1
    print(f"Python {version}: {printed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
