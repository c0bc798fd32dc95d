"""What the tests need to know about a run directory's files (the programs read them; the tests
check them): which files a run wrote, and which processes a merged report's findings are on.

    report_files.rank_files(DIR)   -> [DIR/rank-0.json, ..., DIR/rank-3.journal]   (rank order)
    report_files.processes(finding), report_files.processes_of(rank_entry)  -> {(job, rank)}
    report_files.rank_list(finding["ranks"])  -> [0, 1, 2, 3]   (ranks and [first, last] runs)
    report_files.ran(DIR/report.json, np, mode)  -> (problems, intercepted calls by kind)
"""
import glob
import json
import os

# How a process names its files: rank-N (the job the user started), job-ID-rank-N (jobs started by
# MPI_Comm_spawn), pid-N (before MPI_Init). A rank with a journal and no report was killed.
_PATTERNS = ("rank-*", "job-*-rank-*", "pid-*")


def rank_files(directory):
    files = [p for pattern in _PATTERNS for p in glob.glob(os.path.join(directory, pattern + ".json"))]
    reported = {os.path.splitext(p)[0] for p in files}
    files += [p for pattern in _PATTERNS for p in glob.glob(os.path.join(directory, pattern + ".journal"))
              if os.path.splitext(p)[0] not in reported]

    def order(p):
        name = os.path.basename(p)
        kind = 0 if name.startswith("rank-") else 1 if name.startswith("job-") else 2
        job, _, num = name.rsplit(".", 1)[0].rpartition("-")
        return (kind, job if kind == 1 else "", int(num) if num.isdigit() else 0)

    return sorted(files, key=order)


def job_of(run):
    """The spawned job a rank entry's process belongs to (None for the job the user started)."""
    if not run.get("spawned"):
        return None
    return run.get("job") or f"pid{run.get('pid')}"


def rank_list(ranks):
    """A merged report's "ranks" as a list: [first, last] runs of three or more ranks expanded."""
    out = []
    for r in ranks or []:
        out.extend(range(r[0], r[1] + 1) if isinstance(r, list) else [r])
    return out


def processes(f):
    """The processes a merged finding happened on: (None, rank) for the job the user started,
    (job, rank) for a spawned job's."""
    return ({(None, r) for r in rank_list(f.get("ranks", []))} |
            {(s["job"], r) for s in f.get("spawned_ranks", []) for r in rank_list(s.get("ranks", []))})


def processes_of(rank_entry):
    """The processes a merged report's rank entry stands for (see `processes`): one, or the ranks
    of a gathered job's entry ("ranks")."""
    if "ranks" in rank_entry:
        return [(job_of(rank_entry), r) for r in rank_list(rank_entry["ranks"])]
    return [(job_of(rank_entry), rank_entry.get("rank"))]


def rank_entries(merged):
    """A merged report's "ranks", one (process, entry) per process; entries a gathered report
    made stand for each of their ranks."""
    return [(p, r) for r in merged.get("ranks", []) if not r.get("after_gathered") for p in processes_of(r)]


def ran(path, np, mode, calls_made=True):
    """Whether the job's report at `path` shows attrcheck at work: (problems, calls), problems
    empty when the report has ranks 0..np-1 of the job the user started, each finalized in `mode`,
    and (unless the program makes no call attrcheck intercepts: calls_made=False) its wrappers
    intercepted calls; calls: the intercepted counts by kind (keyval, attribute, object,
    callback), every binding added up. In off mode, a pass-through, no rank reports. The
    benchmarks check their runs with it, so that a run that measured nothing fails."""
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        return [f"no job report: {e}"], {}
    if report.get("schema") != "attrcheck.report":
        return [f"{path}: not a merged report (schema {report.get('schema')!r})"], {}
    entries = rank_entries(report)
    calls = {kind: sum(counts.values()) for kind, counts in (report.get("intercepted") or {}).items()}
    if mode == "off":
        return ([f"{path}: ranks reported in off mode"] if entries else []), calls
    problems = []
    ranks = sorted((rank for (job, rank), _ in entries if job is None), key=lambda r: (r is None, r))
    if ranks != list(range(np)):
        problems.append(f"{path}: rank entries for {ranks}, expected ranks 0 to {np - 1}")
    ended = sorted({(r.get("status"), r.get("mode")) for _, r in entries} - {("finalized", mode)}, key=str)
    if ended:
        problems.append(f"{path}: ranks ended (status, mode) {ended}, expected finalized in {mode} mode")
    if calls_made and not any(calls.values()):
        problems.append(f"{path}: intercepted no call ({calls})")
    return problems, calls
