#!/usr/bin/env python3
"""The job's report at scale: bench/report_at_scale.c at 16, 64 and 256 ranks (oversubscribed
here), natively and under attrcheck (the launcher, shadow mode), in one interleaved run, with 0
(a clean run), 1, 10 and 1,000 distinct findings per rank (half of them the same on every rank,
half a rank's own). Prints, per point, the MPI_Finalize time (the slowest rank's) and the whole
run's time with their ratios to native (medians over the rounds), the files created in and left
in the output directory, and the bytes the gather sent per rank (from the gathered report).
A benchmark: it reports numbers and asserts no threshold; it fails if a checked run's report does
not show attrcheck at work in every rank (report_files.ran) or holds no gathered report.

usage: report_at_scale.py BUILD_DIR [--ranks 16,64,256] [--findings 0,1,10,1000] [--rounds 2]
                          [--mode shadow]
"""
import argparse
import ctypes
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import mpi_config  # noqa: E402
import report_files  # noqa: E402

IN_CREATE, IN_NONBLOCK = 0x100, 0o4000


def created_names(fd):
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    names, i = [], 0
    while i + 16 <= len(data):
        _, mask, _, length = struct.unpack_from("iIII", data, i)
        if mask & IN_CREATE:
            names.append(data[i + 16:i + 16 + length].split(b"\0", 1)[0].decode(errors="replace"))
        i += 16 + length
    return names


def run_once(cfg, build, np, findings, mode, libc):
    """(finalize seconds: the slowest rank's, whole-run seconds, created, left, gathered)"""
    exe = os.path.join(build, "bench", "report_at_scale")
    command = cfg.mpiexec(np, exe, str(findings))
    out = None
    watch = -1
    if mode != "native":
        out = tempfile.mkdtemp(prefix="attrcheck-scale-")
        watch = libc.inotify_init1(IN_NONBLOCK)
        libc.inotify_add_watch(watch, out.encode(), IN_CREATE)
        command = [os.path.join(build, "bin", "attrcheck"), "--mode", mode, "--output", out, "--fail-on", "never",
                   "--"] + command
    start = time.monotonic()
    p = subprocess.run(command, env=cfg.env(), capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - start
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    times = [float(l.split()[2]) for l in p.stdout.splitlines() if l.startswith("finalize ")]
    if len(times) != np:
        raise SystemExit(f"expected {np} finalize times, got {len(times)}:\n{p.stdout[-2000:]}")
    created, left, gathered = [], [], {}
    if out is not None:
        created = created_names(watch)
        os.close(watch)
        left = sorted(os.listdir(out))
        path = os.path.join(out, "report.json")
        problems, _ = report_files.ran(path, np, mode, calls_made=findings > 0)  # 0: MPI_Init, MPI_Finalize
        if not problems:
            with open(path) as f:
                gathers = json.load(f).get("gathers") or []
            if len(gathers) != 1:
                problems.append(f"{path}: {len(gathers)} gathered reports merged in, expected the job's one")
            gathered = (gathers or [{}])[0]
        shutil.rmtree(out, ignore_errors=True)
        if problems:
            raise SystemExit(f"{' '.join(command)}: attrcheck did not run: " + "; ".join(problems))
    return max(times), wall, created, left, gathered


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--ranks", default="16,64,256")
    ap.add_argument("--findings", default="0,1,10,1000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mode", default="shadow")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    cfg = mpi_config.load(build)
    libc = ctypes.CDLL(None, use_errno=True)
    points = [(int(n), int(f)) for n in a.ranks.split(",") for f in a.findings.split(",")]
    results = {}
    for _ in range(a.rounds):
        for np, findings in points:
            for mode in ("native", a.mode):  # interleaved: noise hits both alike
                results.setdefault((np, findings, mode), []).append(run_once(cfg, build, np, findings, mode, libc))
    print(f"{cfg.profile.get('name', cfg.library)}, mode {a.mode}, medians of {a.rounds} rounds; times in seconds")
    head = ("ranks", "findings/rank", "finalize native", "attrcheck", "ratio", "run native", "attrcheck", "ratio",
            "files created", "left", "bytes sent/rank", "largest message")
    rows = [head]
    for np, findings in points:
        nat = results[(np, findings, "native")]
        tool = results[(np, findings, a.mode)]
        fn, ft = statistics.median(r[0] for r in nat), statistics.median(r[0] for r in tool)
        wn, wt = statistics.median(r[1] for r in nat), statistics.median(r[1] for r in tool)
        created = max(len(r[2]) for r in tool)
        left = max(len(r[3]) for r in tool)
        sent = statistics.median(r[4].get("bytes_sent", 0) for r in tool) / np
        largest = max(r[4].get("largest_message", 0) for r in tool)
        rows.append((str(np), str(findings), f"{fn:.3f}", f"{ft:.3f}", f"{ft / fn:.2f}", f"{wn:.2f}", f"{wt:.2f}",
                     f"{wt / wn:.2f}", str(created), str(left), f"{sent:.0f}", str(largest)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    # What the created files were (the temporaries of the atomic writes, the journals of ranks
    # with findings), from the last round.
    for np, findings in points:
        names = sorted(set(results[(np, findings, a.mode)][-1][2]))
        shown = ", ".join(names[:6]) + (f", ... ({len(names)} names)" if len(names) > 6 else "")
        print(f"created at {np} ranks, {findings} findings/rank: {shown}")


if __name__ == "__main__":
    main()
