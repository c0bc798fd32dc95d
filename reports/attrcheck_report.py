"""attrcheck reports: load and validate per-rank reports, merge them, summarize, gate.

Used by the `attrcheck` launcher (merging the per-rank files of a run) and by the
`attrcheck-report` tool. Python 3 standard library only.
"""
import fcntl
import glob
import json
import os
import re
import subprocess
import tempfile

RANK_SCHEMA = "attrcheck.rank-report"
MERGED_SCHEMA = "attrcheck.report"
SUPPORTED_MAJOR = 1
VERSION = "1.0"
SEVERITIES = ("error", "warning", "info")


class ReportError(Exception):
    """A report that cannot be used; the message names the file (and position)."""


def _check_version(path, data):
    version = str(data.get("version", ""))
    try:
        major = int(version.split(".")[0])
    except ValueError:
        raise ReportError(f"{path}: no valid schema version (got {version!r})")
    if major != SUPPORTED_MAJOR:
        raise ReportError(f"{path}: schema version {version} is not supported "
                          f"(this tool reads version {SUPPORTED_MAJOR}.x)")


def load(path):
    """Loads a per-rank or merged report, checking it is one and of a version we read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ReportError(f"{path}: {e.strerror}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}")
    if not isinstance(data, dict) or data.get("schema") not in (RANK_SCHEMA, MERGED_SCHEMA):
        raise ReportError(f"{path}: not an attrcheck report (no 'schema': '{RANK_SCHEMA}' or '{MERGED_SCHEMA}')")
    _check_version(path, data)
    if not isinstance(data.get("findings"), list):
        raise ReportError(f"{path}: 'findings' is missing or not a list")
    return data


def clean(directory):
    """Removes an earlier run's per-rank reports and markers from a run directory."""
    for path in rank_files(directory) + glob.glob(os.path.join(directory, ".*.done")):
        os.unlink(path)


def rank_files(directory):
    """The per-rank report files of a run directory."""
    files = glob.glob(os.path.join(directory, "rank-*.json")) + glob.glob(os.path.join(directory, "pid-*.json"))

    def order(p):
        name = os.path.basename(p)
        num = name.split("-", 1)[1].rsplit(".", 1)[0]
        return (name.startswith("pid-"), int(num) if num.isdigit() else 0)

    return sorted(files, key=order)


def _finding_key(f):
    site = f.get("site") or {}
    # Addresses and handles differ between ranks (ASLR); module-relative offsets do not.
    message = re.sub(r"0x[0-9a-f]+", "0x?", f.get("message", ""))
    return (f.get("rule"), f.get("call"), site.get("module"), site.get("offset"), message)


def merge(reports, command=None, exit_code=None):
    """Merges per-rank (or already merged) reports into one merged report."""
    ranks, merged = [], {}
    for path, data in reports:
        if data.get("schema") == MERGED_SCHEMA:
            ranks.extend(data.get("ranks", []))
            findings = data["findings"]
        else:
            run = data.get("run", {})
            ranks.append({"rank": run.get("rank"), "size": run.get("size"), "pid": run.get("pid"),
                          "status": run.get("status"),
                          "signal": run.get("signal", 0), "mode": run.get("mode"), "file": os.path.basename(path)})
            findings = [dict(f, ranks=[run.get("rank")]) for f in data["findings"]]
        for f in findings:
            key = _finding_key(f)
            if key not in merged:
                entry = {k: v for k, v in f.items() if k not in ("rank", "ranks", "count")}
                entry["count"] = 0
                entry["ranks"] = []
                merged[key] = entry
            entry = merged[key]
            entry["count"] += int(f.get("count", 1))
            for r in f.get("ranks", [f.get("rank")]):
                if r not in entry["ranks"]:
                    entry["ranks"].append(r)
    findings = sorted(merged.values(), key=lambda f: (SEVERITIES.index(f.get("severity", "info"))
                                                      if f.get("severity") in SEVERITIES else 3, f.get("rule", "")))
    for f in findings:
        f["ranks"].sort(key=lambda r: (r is None, r if r is not None else 0))
    summary = {s: sum(f["count"] for f in findings if f.get("severity") == s) for s in SEVERITIES}
    out = {"schema": MERGED_SCHEMA, "version": VERSION, "tool": {"name": "attrcheck"},
           "ranks": sorted(ranks, key=lambda r: (r.get("rank") is None, r.get("rank") or 0)),
           "summary": summary, "findings": findings}
    if command is not None:
        out["command"] = list(command)
    if exit_code is not None:
        out["exit_code"] = exit_code
    return out


def write_atomic(path, data, overwrite=True):
    """Writes JSON via a temporary file and rename; refuses to replace a file unless `overwrite`."""
    if not overwrite and os.path.exists(path):
        raise ReportError(f"{path}: already exists (pass --force to overwrite)")
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".attrcheck-", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def merge_directory(directory, command=None, exit_code=None, lock=True):
    """Merges a run directory's per-rank reports into DIR/report.json; returns the merged report.

    With `lock`, concurrent mergers (every rank's launcher in `mpirun attrcheck -- app`) take
    turns, so the last one writes a report with every rank that has finished.
    """
    lock_fd = None
    if lock:
        lock_fd = os.open(os.path.join(directory, ".merge.lock"), os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
    try:
        reports = []
        for path in rank_files(directory):
            try:
                reports.append((path, load(path)))
            except ReportError as e:
                # A rank killed while writing leaves at worst a temp file; a broken file is reported.
                reports.append((path, {"schema": RANK_SCHEMA, "version": VERSION, "findings": [],
                                       "run": {"status": f"unreadable: {e}"}}))
        merged = symbolized(merge(reports, command=command, exit_code=exit_code))
        write_atomic(os.path.join(directory, "report.json"), merged)
        return merged
    finally:
        if lock_fd is not None:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)


def complete(directory, merged):
    """Whether every rank of the run (per the reports' world size) has a report in `merged`."""
    sizes = {r.get("size") for r in merged.get("ranks", []) if r.get("size")}
    return len(sizes) == 1 and len(merged["ranks"]) >= sizes.pop()


def claim_once(directory, what):
    """True for exactly one caller per run directory and `what` (an O_EXCL marker file)."""
    try:
        os.close(os.open(os.path.join(directory, f".{what}.done"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        return False


# Symbolization: module + module-relative offset -> function, file, line (binutils' addr2line),
# after the run, so that it also works for the report of a crashed rank.

_ELF_EXEC = {}


def _is_fixed_address(module):
    """True for a non-PIE executable (ELF type EXEC), whose addresses are absolute."""
    if module not in _ELF_EXEC:
        try:
            with open(module, "rb") as f:
                head = f.read(18)
            _ELF_EXEC[module] = head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 2
        except OSError:
            _ELF_EXEC[module] = False
    return _ELF_EXEC[module]


_SYMBOLS = {}


def symbolize(site):
    """Adds function, file and line to a site where the module's debug info has them."""
    module, offset = site.get("module"), site.get("offset")
    if not module or not offset or not os.path.isabs(module) or not os.path.exists(module):
        return site
    # The site is a return address: the call is the instruction before it.
    address = int(site["address"] if _is_fixed_address(module) else offset, 16) - 1
    key = (module, address)
    if key not in _SYMBOLS:
        try:
            out = subprocess.run(["addr2line", "-f", "-C", "-e", module, hex(address)],
                                 capture_output=True, text=True, timeout=30).stdout.split("\n")
        except (OSError, subprocess.SubprocessError):
            out = []
        function = out[0].strip() if out and out[0].strip() != "??" else ""
        file, line = "", 0
        if len(out) > 1 and ":" in out[1]:
            file, _, rest = out[1].strip().rpartition(":")
            digits = re.match(r"\d+", rest)
            line = int(digits.group()) if digits else 0
            if file == "??":
                file, line = "", 0
        _SYMBOLS[key] = (function, file, line)
    function, file, line = _SYMBOLS[key]
    out = dict(site)
    if function:
        out["function"] = function
    if file:
        out["file"], out["line"] = file, line
    return out


def symbolized(report):
    """Symbolizes every finding's site in place; returns the report."""
    for f in report["findings"]:
        if f.get("site"):
            f["site"] = symbolize(f["site"])
    return report


def at_or_above(findings, threshold):
    """Findings whose severity is at or above `threshold` ('error' | 'warning' | 'info' | 'never')."""
    if threshold == "never":
        return []
    limit = SEVERITIES.index(threshold)
    return [f for f in findings if f.get("severity") in SEVERITIES and SEVERITIES.index(f["severity"]) <= limit]


def location(f):
    """Where a finding is, for people: function (file:line), else symbol, else module+offset."""
    site = f.get("site") or {}
    if site.get("file"):
        return f"{site.get('function') or site.get('symbol') or '?'} ({os.path.basename(site['file'])}:{site['line']})"
    if site.get("symbol"):
        return site["symbol"]
    module = os.path.basename(site.get("module") or "") or "?"
    return f"{module}+{site.get('offset', '?')}"


def _ranks_text(ranks):
    ranks = [r for r in ranks if r is not None]
    if not ranks:
        return "-"
    # 0,1,2,5 -> 0-2,5
    out, start, prev = [], ranks[0], ranks[0]
    for r in ranks[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)


def summary_text(report):
    """A human table: rule, severity, count, ranks, first location."""
    findings = report.get("findings", [])
    lines = []
    s = report.get("summary") or {k: sum(f.get("count", 1) for f in findings if f.get("severity") == k)
                                  for k in SEVERITIES}
    bad = [r for r in report.get("ranks", []) if r.get("status") not in ("finalized", None)]
    lines.append(f"attrcheck: {s.get('error', 0)} error(s), {s.get('warning', 0)} warning(s), "
                 f"{s.get('info', 0)} info in {len(report.get('ranks', []))} rank report(s)")
    for r in bad:
        sig = f", signal {r['signal']}" if r.get("signal") else ""
        lines.append(f"attrcheck: rank {r.get('rank')} ended {r.get('status')}{sig}")
    if findings:
        rows = [("severity", "rule", "count", "ranks", "where", "message")]
        for f in findings:
            rows.append((f.get("severity", "?"), f.get("rule", "?"), str(f.get("count", 1)),
                         _ranks_text(f.get("ranks", [])), location(f), f.get("message", "")))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            lines.append("  " + "  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5])
    return "\n".join(lines) + "\n"
