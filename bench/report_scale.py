#!/usr/bin/env python3
"""Scale benchmark of the report tools: N rank reports with F findings each (realistic: stacks,
provenance, sites shared across ranks), merged and summarized with attrcheck-report. Prints wall
time, CPU time (user + system) and peak memory of each step, and what the merge holds; it fails if
the merge lost a rank (a benchmark: no thresholds; docs/performance.md compares them with the
targets of <= 3 s and <= 256 MiB for 4096 x 100).

usage: report_scale.py BUILD_DIR [--ranks N] [--findings F]
"""
import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import report_files  # noqa: E402  (a merged report's ranks)

RULES = [("keyval.freed", "error"), ("keyval.double-free", "error"), ("keyval.kind-mismatch", "error"),
         ("attr.leak", "warning"), ("keyval.leak", "warning"), ("deprecated.call", "warning"),
         ("callback.error", "error"), ("impl.divergence", "warning"), ("attr.delete-absent", "warning")]


def rank_report(rank, size, findings, rng):
    stacks, out = [], []
    for i in range(findings):
        rule, severity = RULES[i % len(RULES)]
        site = 0x1000 + (i % 60) * 0x40  # 60 call sites in the program, shared by all ranks
        frames = [{"address": hex(0x550000000000 + site + d), "module": "/opt/app/bin/solver",
                   "offset": hex(site + d * 0x100)} for d in range(8)]
        stacks.append({"id": len(stacks) + 1, "frames": frames})
        f = {"rule": rule, "severity": severity, "message": f"MPI_Comm_set_attr: keyval {12 + i % 40} ({rule})",
             "hint": "fix it", "call": "MPI_Comm_set_attr", "rank": rank, "count": rng.randint(1, 50),
             "keyval": 12 + i % 40, "stack": len(stacks),
             "site": {"address": frames[0]["address"], "offset": frames[0]["offset"], "symbol": "",
                      "module": "/opt/app/bin/solver"}}
        if rule.startswith("keyval"):
            stacks.append({"id": len(stacks) + 1, "frames": frames[2:]})
            f["provenance"] = [{"what": "keyval created", "stack": len(stacks)}]
        out.append(f)
    return {"schema": "attrcheck.rank-report", "version": "1.0", "tool": {"name": "attrcheck", "version": "0.1.0"},
            "run": {"rank": rank, "size": size, "pid": 1000 + rank, "mode": "shadow", "on_error": "report",
                    "thread_level": "MPI_THREAD_SINGLE", "mpi_library": "Open MPI v4.1.4", "status": "finalized",
                    "signal": 0},
            "summary": {"error": 0, "warning": 0, "info": 0, "dropped": 0}, "findings": out, "stacks": stacks}


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    # MiB (a high-water mark over children so far)
    return elapsed, cpu, max(after.ru_maxrss, before.ru_maxrss) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--findings", type=int, default=100)
    a = ap.parse_args()
    tool = os.path.join(os.path.abspath(a.build), "bin", "attrcheck-report")
    work = tempfile.mkdtemp(prefix="attrcheck-scale-")
    try:
        rng = random.Random(1)
        start = time.monotonic()
        for r in range(a.ranks):
            with open(os.path.join(work, f"rank-{r}.json"), "w") as f:
                json.dump(rank_report(r, a.ranks, a.findings, rng), f)
        os.sync()  # flush the generated files first: write-back would otherwise be timed with the merge
        size = sum(os.path.getsize(os.path.join(work, n)) for n in os.listdir(work))
        print(f"generated {a.ranks} rank reports x {a.findings} findings ({size / 2**20:.0f} MiB) "
              f"in {time.monotonic() - start:.1f} s")
        merged = os.path.join(work, "merged.json")
        t, cpu, mem = timed([tool, "merge", work, "-o", merged])
        print(f"merge   : {t:6.2f} s, {cpu:6.2f} s CPU, peak {mem:6.0f} MiB   (target <= 3 s, <= 256 MiB)")
        with open(merged) as f:
            report = json.load(f)
        ranks = len(report_files.rank_entries(report))
        occurrences = sum(f.get("count", 1) for f in report.get("findings", []))
        print(f"merged  : {ranks} rank reports, {len(report.get('findings', []))} distinct findings, "
              f"{occurrences} occurrences")
        if ranks != a.ranks:
            sys.exit(f"report_scale: the merge of {a.ranks} rank reports holds {ranks} ranks")
        t, cpu, mem = timed([tool, "summary", merged])
        print(f"summary : {t:6.2f} s, {cpu:6.2f} s CPU, peak {mem:6.0f} MiB   (of the merged report)")
        t, cpu, mem = timed([tool, "summary", work])
        print(f"summary : {t:6.2f} s, {cpu:6.2f} s CPU, peak {mem:6.0f} MiB   (straight from the {a.ranks} rank "
              "reports; target <= 3 s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
