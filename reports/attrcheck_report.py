"""attrcheck reports: load and validate per-rank reports, merge them, summarize, gate.

Used by the `attrcheck` launcher (merging the per-rank files of a run) and by the
`attrcheck-report` tool. Python 3 standard library only.
"""
import fcntl
import fnmatch
import gc
import glob
import json
import os
import re
import subprocess
import tempfile

RANK_SCHEMA = "attrcheck.rank-report"
JOURNAL_SCHEMA = "attrcheck.rank-journal"
MERGED_SCHEMA = "attrcheck.report"
SUPPORTED_MAJOR = 1
VERSION = "1.2"
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
    """Loads a per-rank or merged report, checking it is one and of a version we read. A rank's
    journal (rank-N.journal) is loaded as the rank report it stands for; a rank report gets the
    findings its journal recorded after it was written."""
    if path.endswith(".journal"):
        return load_journal(path)
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
    journal = os.path.splitext(path)[0] + ".journal"
    if data.get("schema") == RANK_SCHEMA and os.path.exists(journal):
        _add_journal(data, _journal_lines(journal))
    return data


def _journal_lines(path):
    """A journal's header and its finding lines (one per seq). A line cut short by the process's
    death (the last one) is left out."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise ReportError(f"{path}: {e.strerror}")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}:1: not a valid journal header: {e.msg}")
    if not isinstance(header, dict) or header.get("schema") != JOURNAL_SCHEMA:
        raise ReportError(f"{path}: not an attrcheck journal (no 'schema': '{JOURNAL_SCHEMA}')")
    _check_version(path, header)
    entries = {}
    for line in lines[1:]:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("seq"), int) and isinstance(entry.get("finding"), dict):
            entries.setdefault(entry["seq"], entry)
    return header, [entries[k] for k in sorted(entries)]


def _add_journal(data, journal, first_seq=None):
    """Appends the journal's findings from `first_seq` on (default: those past the report's own),
    renumbering their stacks into the report's."""
    _header, entries = journal
    start = len(data["findings"]) if first_seq is None else first_seq
    stacks = data.setdefault("stacks", [])
    next_id = max((s.get("id", 0) for s in stacks), default=0) + 1
    rank = data.get("run", {}).get("rank")
    for entry in entries:
        if entry["seq"] < start:
            continue
        ids = {}
        for s in entry.get("stacks", []):
            ids[s.get("id")] = next_id
            stacks.append({"id": next_id, "frames": s.get("frames", [])})
            next_id += 1
        f = dict(entry["finding"], rank=rank)
        if "stack" in f:
            f["stack"] = ids.get(f["stack"], f["stack"])
        if f.get("provenance"):
            f["provenance"] = [dict(p, stack=ids.get(p["stack"], p["stack"])) if "stack" in p else p
                               for p in f["provenance"]]
        data["findings"].append(f)


def load_journal(path):
    """The rank report a journal stands for: a rank that never wrote its report (killed with
    SIGKILL, or still running). Its status says so: 'running'."""
    header, entries = _journal_lines(path)
    run = dict(header.get("run", {}), status="running", signal=0)
    data = {"schema": RANK_SCHEMA, "version": header.get("version"), "tool": header.get("tool", {}),
            "run": run, "findings": [], "stacks": []}
    _add_journal(data, (header, entries), first_seq=0)
    counts = {s: sum(int(f.get("count", 1)) for f in data["findings"] if f.get("severity") == s) for s in SEVERITIES}
    data["summary"] = dict(counts, dropped=0)
    return data


def clean(directory):
    """Removes an earlier run's per-rank reports, journals and markers from a run directory."""
    for path in set(rank_files(directory) + journal_files(directory) + glob.glob(os.path.join(directory, ".*.done"))):
        os.unlink(path)


# How a process names its files: rank-N (the job the user started), job-ID-rank-N (jobs started by
# MPI_Comm_spawn), pid-N (before MPI_Init).
_PROCESS_FILES = ("rank-*", "job-*-rank-*", "pid-*")


def _process_files(directory, extension):
    return [p for pattern in _PROCESS_FILES for p in glob.glob(os.path.join(directory, pattern + extension))]


def journal_files(directory):
    """The ranks' journals (rank-N.journal, job-ID-rank-N.journal, pid-N.journal): findings as they
    were found."""
    return _process_files(directory, ".journal")


def rank_files(directory):
    """The per-rank report files of a run directory: rank-N.json (the job the user started),
    job-ID-rank-N.json (jobs started by MPI_Comm_spawn), pid-N.json (before MPI_Init), and the
    journal of a rank that wrote no report (killed without warning)."""
    files = _process_files(directory, ".json")
    reported = {os.path.splitext(p)[0] for p in files}
    files += [j for j in journal_files(directory) if os.path.splitext(j)[0] not in reported]

    def order(p):
        name = os.path.basename(p)
        kind = 0 if name.startswith("rank-") else 1 if name.startswith("job-") else 2
        job, _, num = name.rsplit(".", 1)[0].rpartition("-")
        return (kind, job if kind == 1 else "", int(num) if num.isdigit() else 0)

    return sorted(files, key=order)


def job_of(run):
    """The spawned job a rank report's process belongs to (None for the job the user started):
    the process manager's job identity, else (none given) the process itself."""
    if not run.get("spawned"):
        return None
    return run.get("job") or f"pid{run.get('pid')}"


_HEX = re.compile(r"0x[0-9a-f]+")


def _finding_key(f):
    site = f.get("site") or {}
    # Addresses and handles differ between ranks (ASLR); module-relative offsets do not.
    message = _HEX.sub("0x?", f.get("message", ""))
    return (f.get("rule"), f.get("call"), site.get("module"), site.get("offset"), message)


class _Depot:
    """The merged report's stacks: each distinct one once (by module and offset, which are the
    same in every rank), numbered from 1."""

    def __init__(self):
        self.ids, self.stacks = {}, []

    def intern(self, frames):
        key = tuple((fr.get("module", ""), fr.get("offset", "")) for fr in frames)
        if not key:
            return None
        if key not in self.ids:
            self.ids[key] = len(self.stacks) + 1
            self.stacks.append({"id": self.ids[key], "frames": [dict(fr) for fr in frames]})
        return self.ids[key]


def _restack(f, table, depot):
    """Points a finding's stack references (its own and its provenance's) at the merged depot."""
    def repoint(d):
        if "stack" in d:
            sid = depot.intern(table.get(d["stack"], []))
            if sid:
                d["stack"] = sid
            else:
                del d["stack"]
        return d

    repoint(f)
    if f.get("provenance"):
        f["provenance"] = [repoint(dict(p)) for p in f["provenance"]]
    return f


class Merger:
    """Folds reports into one merged report, one at a time (4096 ranks are never all in memory)."""

    def __init__(self):
        self.ranks, self.merged, self.depot = [], {}, _Depot()

    def add(self, path, data):
        table = {s["id"]: s.get("frames", []) for s in data.get("stacks", [])}
        if data.get("schema") == MERGED_SCHEMA:
            self.ranks.extend(data.get("ranks", []))
            findings, rank, job = data["findings"], None, None
        else:
            run = data.get("run", {})
            rank, job = run.get("rank"), job_of(run)
            entry = {"rank": rank, "size": run.get("size"), "pid": run.get("pid"),
                     "status": run.get("status"), "signal": run.get("signal", 0),
                     "mode": run.get("mode"), "file": os.path.basename(path)}
            if "spawned" in run:
                entry["job"], entry["spawned"] = run.get("job") or None, bool(run["spawned"])
            self.ranks.append(entry)
            findings = data["findings"]
        for f in findings:
            key = _finding_key(f)
            entry = self.merged.get(key)
            if entry is None:
                entry = _restack({k: v for k, v in f.items() if k not in ("rank", "ranks", "count", "spawned_ranks")},
                                 table, self.depot)
                entry["count"] = 0
                entry["ranks"] = set()
                entry["spawned_ranks"] = {}
                self.merged[key] = entry
            entry["count"] += int(f.get("count", 1))
            if job is not None:  # a rank of a spawned job: its world rank means nothing on its own
                entry["spawned_ranks"].setdefault(job, set()).add(rank)
            elif rank is not None or "ranks" not in f:
                entry["ranks"].add(rank)
            else:
                entry["ranks"].update(f["ranks"])
                for s in f.get("spawned_ranks", []):
                    entry["spawned_ranks"].setdefault(s["job"], set()).update(s["ranks"])

    def result(self, command=None, exit_code=None):
        findings = sorted(self.merged.values(), key=lambda f: (SEVERITIES.index(f.get("severity", "info"))
                                                               if f.get("severity") in SEVERITIES else 3,
                                                               f.get("rule", "")))
        for f in findings:
            f["ranks"] = sorted(f["ranks"], key=lambda r: (r is None, r if r is not None else 0))
            spawned = f.pop("spawned_ranks")
            if spawned:
                f["spawned_ranks"] = [{"job": job, "ranks": sorted(spawned[job], key=lambda r: (r is None, r or 0))}
                                      for job in sorted(spawned)]
        summary = {s: sum(f["count"] for f in findings if f.get("severity") == s) for s in SEVERITIES}
        out = {"schema": MERGED_SCHEMA, "version": VERSION, "tool": {"name": "attrcheck"},
               "ranks": sorted(self.ranks, key=lambda r: (bool(r.get("spawned")), r.get("job") or "",
                                                          r.get("rank") is None, r.get("rank") or 0)),
               "summary": summary, "findings": findings, "stacks": self.depot.stacks}
        if command is not None:
            out["command"] = list(command)
        if exit_code is not None:
            out["exit_code"] = exit_code
        return out


def merge(reports, command=None, exit_code=None):
    """Merges per-rank (or already merged) reports, given as (path, data) pairs."""
    merger = Merger()
    for path, data in reports:
        merger.add(path, data)
    return merger.result(command, exit_code)


def _merge_chunk(args):
    paths, tolerate_broken = args
    return _merge_serial(paths, None, None, tolerate_broken)


def merge_files(paths, command=None, exit_code=None, tolerate_broken=False):
    """Loads and merges report files. A file that cannot be read is an error, or with
    `tolerate_broken` (a run directory, where a rank may have died mid-write) a rank entry saying
    so. Many files are read by one process per core, each folding its share into a partial merged
    report; the partial reports (small: findings repeat across ranks) are then merged."""
    workers = min(os.cpu_count() or 1, 8)
    if workers < 2 or len(paths) < 256:
        return _merge_serial(paths, command, exit_code, tolerate_broken)
    import multiprocessing
    chunks = [(paths[i::workers], tolerate_broken) for i in range(workers)]
    with multiprocessing.Pool(workers) as pool:
        partial = pool.map(_merge_chunk, chunks)
    merger = Merger()
    for part in partial:
        merger.add("", part)
    return merger.result(command, exit_code)


def _merge_serial(paths, command, exit_code, tolerate_broken):
    merger = Merger()
    collecting = gc.isenabled()
    gc.disable()  # JSON trees have no cycles: the collector would only rescan them, again and again
    try:
        for path in paths:
            try:
                data = load(path)
            except ReportError as e:
                if not tolerate_broken:
                    raise
                data = {"schema": RANK_SCHEMA, "version": VERSION, "findings": [],
                        "run": {"status": f"unreadable: {e}"}}
            merger.add(path, data)
        return merger.result(command, exit_code)
    finally:
        if collecting:
            gc.enable()


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


def merge_directory(directory, command=None, exit_code=None, lock=True, suppressions=None):
    """Merges a run directory's per-rank reports into DIR/report.json; returns the merged report.

    With `lock`, concurrent mergers (every rank's launcher in `mpirun attrcheck -- app`) take
    turns, so the last one writes a report with every rank that has finished.
    """
    lock_fd = None
    if lock:
        lock_fd = os.open(os.path.join(directory, ".merge.lock"), os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
    try:
        merged = merge_files(rank_files(directory), command=command, exit_code=exit_code, tolerate_broken=True)
        merged = suppress(symbolized(merged), suppressions)
        write_atomic(os.path.join(directory, "report.json"), merged)
        return merged
    finally:
        if lock_fd is not None:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)


def complete(directory, merged):
    """Whether every rank of the run (per the reports' world size) has a report in `merged`
    (the job the user started; spawned jobs are not counted)."""
    # (a rank known from its journal alone has not finished)
    ranks = [r for r in merged.get("ranks", [])
             if not r.get("spawned") and not str(r.get("file", "")).endswith(".journal")]
    sizes = {r.get("size") for r in ranks if r.get("size")}
    return len(sizes) == 1 and len(ranks) >= sizes.pop()


def processes(f):
    """The processes a merged finding happened on: (None, rank) for the job the user started,
    (job, rank) for a spawned job's."""
    return ({(None, r) for r in f.get("ranks", [])} |
            {(s["job"], r) for s in f.get("spawned_ranks", []) for r in s.get("ranks", [])})


def process_of(rank_entry):
    """A merged report's rank entry as a process key (see `processes`)."""
    return (job_of(rank_entry), rank_entry.get("rank"))


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


def _addr2line_target(frame):
    """(module, address for addr2line) of a frame or site, or None if it cannot be symbolized."""
    module, offset = frame.get("module"), frame.get("offset")
    if not module or not offset or not os.path.isabs(module) or not os.path.exists(module):
        return None
    base = frame.get("address") if _is_fixed_address(module) else offset
    if not base:
        return None
    # A callback's entry address is its function as is. A return address: the call is the
    # instruction before it (at a function's entry, minus one would name the function before).
    return module, int(base, 16) - (0 if frame.get("entry") else 1)


def _function_symbols(module):
    """[(start, end, name)] of the module's function symbols with a size, from its symbol table,
    or from its dynamic one when it is stripped (binutils' nm)."""
    symbols = []
    for extra in ([], ["-D"]):
        try:
            out = subprocess.run(["nm", "-S", "-C", "--defined-only"] + extra + [module],
                                 capture_output=True, text=True, timeout=120).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        for line in out.splitlines():
            parts = line.split(None, 3)
            if len(parts) == 4 and parts[2] in "TtWwi" and len(parts[2]) == 1:
                try:
                    start, size = int(parts[0], 16), int(parts[1], 16)
                except ValueError:
                    continue
                symbols.append((start, start + size, parts[3]))
        if symbols:
            break
    return symbols


def _covering(symbols, address):
    """The name of the function symbol whose extent holds `address`, or ''."""
    for start, end, name in symbols:
        if start <= address < end:
            return name
    return ""


def _addr2line(module, addresses):
    """{address: (function, file, line)} from one addr2line run over a module. Without debug
    information addr2line names the nearest symbol *before* an address, which in a stripped
    library is often another function (a static one's address gets the exported one before it):
    a name is kept only when that symbol's extent holds the address."""
    try:
        out = subprocess.run(["addr2line", "-f", "-C", "-e", module] + [hex(a) for a in addresses],
                             capture_output=True, text=True, timeout=120).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return {}
    symbols = None
    result = {}
    for i, address in enumerate(addresses):
        if 2 * i + 1 >= len(out):
            break
        function = out[2 * i].strip()
        where = out[2 * i + 1].strip()
        file, _, rest = where.rpartition(":")
        digits = re.match(r"\d+", rest)
        line = int(digits.group()) if digits and file != "??" else 0
        function = "" if function == "??" else function
        if function and file in ("??", ""):  # named from a symbol table only: check its extent
            if symbols is None:
                symbols = _function_symbols(module)
            function = _covering(symbols, address)
        result[address] = (function, "" if file in ("??", "") else file, line)
    return result


def symbolized(report):
    """Adds function, file and line to every site and stack frame whose module has them
    (binutils' addr2line, one run per module); returns the report. Idempotent. Frames the rank
    already symbolized in-process at MPI_Finalize (marked "symbolized", or carrying a function)
    are left as they are."""
    if report.get("symbolized"):
        return report
    report["symbolized"] = True
    frames = [f["site"] for f in report.get("findings", []) if f.get("site")]
    for stack in report.get("stacks", []):
        frames.extend(stack.get("frames", []))
    frames = [fr for fr in frames if not (fr.get("symbolized") or fr.get("function"))]
    wanted = {}
    for frame in frames:
        target = _addr2line_target(frame)
        if target:
            wanted.setdefault(target[0], set()).add(target[1])
    known = {}
    for module, addresses in wanted.items():
        for address, info in _addr2line(module, sorted(addresses)).items():
            known[(module, address)] = info
    for frame in frames:
        target = _addr2line_target(frame)
        function, file, line = known.get(target, ("", "", 0)) if target else ("", "", 0)
        if function:
            frame["function"] = function
        if file:
            frame["file"], frame["line"] = file, line
    return report


# Suppressions: a file of lines "RULE_GLOB KIND:GLOB" (# comments, blank lines ignored), where
# KIND is fun (a function in the finding's frames), lib (a module path in them), src (a source
# file in them) or at (a frame's module path + offset, for stripped libraries), e.g.
#     keyval.leak     fun:PetscInitialize*
#     deprecated.*    lib:*/libhdf5*.so*
#     attr.leak       src:*/vendor/*
#     attr.world-at-finalize  at:*/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so+0x706ec
# A finding's frames are its site, its stack and its provenance stacks (where the keyval was
# created, the attribute set, ...). A finding whose rule matches and one of whose frames matches
# is suppressed. The default suppressions (default.supp, next to this module) apply unless the
# user turns them off.

DEFAULT_SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default.supp")


class Suppression:
    KINDS = ("fun", "lib", "src", "at")

    def __init__(self, rule, kind, pattern, origin, default=False):
        self.rule, self.kind, self.pattern, self.origin = rule, kind, pattern, origin
        self.default = default
        self.used = 0

    def matches(self, finding, frames):
        if not fnmatch.fnmatchcase(finding.get("rule", ""), self.rule):
            return False
        for frame in frames:
            if self.kind == "at":
                value = f"{frame.get('module', '')}+{frame.get('offset', '')}" if frame.get("module") else ""
            else:
                field = {"fun": "function", "lib": "module", "src": "file"}[self.kind]
                value = frame.get(field) or (frame.get("symbol", "").split("+")[0] if self.kind == "fun" else "")
            if value and fnmatch.fnmatchcase(value, self.pattern):
                return True
        return False


def default_suppressions():
    """The suppressions shipped with attrcheck (benign patterns of well-known libraries)."""
    if not os.path.exists(DEFAULT_SUPPRESSIONS):
        return []
    return load_suppressions(DEFAULT_SUPPRESSIONS, default=True)


def load_suppressions(path, default=False):
    """Parses a suppressions file; a malformed line is a ReportError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ReportError(f"{path}: {e.strerror}")
    entries = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        where = f"{path}:{number}"
        if len(parts) != 2:
            raise ReportError(f"{where}: expected 'RULE_GLOB KIND:GLOB' (KIND: fun, lib, src or at), got '{text}'")
        rule, frame = parts
        kind, sep, pattern = frame.partition(":")
        if not sep or kind not in Suppression.KINDS or not pattern:
            raise ReportError(f"{where}: frame pattern must be fun:GLOB, lib:GLOB, src:GLOB or at:GLOB, got '{frame}'")
        if not re.fullmatch(r"[a-z*?\[\].-]+", rule):
            raise ReportError(f"{where}: '{rule}' is not a rule id or glob (e.g. keyval.leak, deprecated.*)")
        entries.append(Suppression(rule, kind, pattern, where, default))
    return entries


def suppress(report, suppressions):
    """Moves findings that a suppression matches into report['suppressed'] (with their counts and
    the suppression that matched) and recounts the summary. Symbolize first. Returns the report."""
    if not suppressions:
        return report
    kept, suppressed = [], list(report.get("suppressed", []))
    for f in report["findings"]:
        frames = [f.get("site") or {}] + stack_frames(report, f.get("stack"))
        for p in f.get("provenance", []):
            frames += stack_frames(report, p.get("stack"))
        hit = next((s for s in suppressions if s.matches(f, frames)), None)
        if hit is None:
            kept.append(f)
            continue
        hit.used += f.get("count", 1)
        entry = {"rule": f["rule"], "severity": f.get("severity"), "message": f.get("message", ""),
                 "count": f.get("count", 1), "ranks": f.get("ranks", []), "suppression": hit.origin}
        if f.get("spawned_ranks"):
            entry["spawned_ranks"] = f["spawned_ranks"]
        if hit.default:
            entry["default"] = True
        suppressed.append(entry)
    report["findings"] = kept
    report["suppressed"] = suppressed
    report["summary"] = {s: sum(f.get("count", 1) for f in kept if f.get("severity") == s) for s in SEVERITIES}
    report["summary"]["suppressed"] = sum(f["count"] for f in suppressed)
    return report


def at_or_above(findings, threshold):
    """Findings whose severity is at or above `threshold` ('error' | 'warning' | 'info' | 'never')."""
    if threshold == "never":
        return []
    limit = SEVERITIES.index(threshold)
    return [f for f in findings if f.get("severity") in SEVERITIES and SEVERITIES.index(f["severity"]) <= limit]


def frame_text(frame):
    """function (file:line), else the module and offset."""
    if frame.get("file"):
        return f"{frame.get('function') or '?'} ({os.path.basename(frame['file'])}:{frame.get('line', 0)})"
    if frame.get("function"):
        return frame["function"]
    return f"{os.path.basename(frame.get('module') or '?')}+{frame.get('offset', '?')}"


def stack_frames(report, stack_id):
    """The frames of a stack id of `report` ([] if none)."""
    for s in report.get("stacks", []):
        if s.get("id") == stack_id:
            return s.get("frames", [])
    return []


def location(f):
    """Where a finding is, for people: function (file:line), else symbol, else module+offset."""
    site = f.get("site") or {}
    if site.get("file"):
        return f"{site.get('function') or site.get('symbol') or '?'} ({os.path.basename(site['file'])}:{site['line']})"
    if site.get("symbol"):
        return site["symbol"]
    module = os.path.basename(site.get("module") or "") or "?"
    return f"{module}+{site.get('offset', '?')}"


def _ranks_text(ranks, spawned=()):
    """0,1,2,5 -> 0-2,5; spawned jobs' ranks follow as 'job ID:0-1'."""
    text = _rank_ranges(ranks)
    for s in spawned:
        text = ("" if text == "-" else text + " ") + f"job {s['job']}:{_rank_ranges(s.get('ranks', []))}"
    return text


def _rank_ranges(ranks):
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
    suppressed = f", {s['suppressed']} suppressed" if s.get("suppressed") else ""
    by_default = sum(x.get("count", 1) for x in report.get("suppressed", []) if x.get("default"))
    if by_default:
        suppressed += f" ({by_default} by default suppressions)"
    lines.append(f"attrcheck: {s.get('error', 0)} error(s), {s.get('warning', 0)} warning(s), "
                 f"{s.get('info', 0)} info{suppressed} in {len(report.get('ranks', []))} rank report(s)")
    for r in bad:
        sig = f", signal {r['signal']}" if r.get("signal") else ""
        job = job_of(r)
        lines.append(f"attrcheck: rank {r.get('rank')}{f' of spawned job {job}' if job else ''} "
                     f"ended {r.get('status')}{sig}")
    if findings:
        rows = [("severity", "rule", "count", "ranks", "where", "message")]
        for f in findings:
            rows.append((f.get("severity", "?"), f.get("rule", "?"), str(f.get("count", 1)),
                         _ranks_text(f.get("ranks", []), f.get("spawned_ranks", [])), location(f),
                         f.get("message", "")))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for r in rows:
            lines.append("  " + "  ".join(r[i].ljust(widths[i]) for i in range(5)) + "  " + r[5])
    # Like a memory checker's "freed here / allocated here": where what each finding is about came from.
    with_provenance = [f for f in findings if f.get("provenance")]
    if with_provenance:
        lines.append("provenance:")
        for f in with_provenance:
            lines.append(f"  {f.get('rule')} at {location(f)}:")
            for p in f["provenance"]:
                frames = stack_frames(report, p.get("stack"))
                lines.append(f"    {p.get('what')} at {frame_text(frames[0]) if frames else '?'}")
    return "\n".join(lines) + "\n"
