#!/usr/bin/env python3
"""Runs one MPI test case under the attrcheck launcher and checks the merged report.

A case is a C, C++ or Fortran program whose first comment lines (// or !) say what must happen:
  // attrcheck-test: np=2 modes=shadow,emulate
  // expect: keyval.double-free keyval.leak     rules that must be reported (repeatable)
  // clean                                       no error or warning besides the expected rules
  // exit: 0 | nonzero | signal | without-finalize | any  how the program must end (default 0);
                                               without-finalize: what the library's launcher
                                               makes of a rank's exit() without MPI_Finalize;
                                               any: the launcher's status varies natively too
  // native: same-stdout                         stdout must equal a native run's
  // expect-processes: 4                         the merged report holds this many rank reports,
                                                 each of a distinct process (job, rank)
  // expect-everywhere: keyval.leak              the rule is reported on every one of them
  // expect-message: RULE TEXT                   some RULE finding's message contains TEXT (repeatable)
  // expect-where: RULE FUNCTION                 every RULE finding's site is symbolized to FUNCTION
  // expect-at: RULE FILE:LINE                   some RULE finding's site (or a frame of its stack)
                                               is symbolized to FILE:LINE (FILE: the base name;
                                               LINE or FIRST-LAST: a callback's entry address
                                               maps to one of its lines, as the compiler chose)
  // expect-provenance: RULE FUNCTION:LINE WHAT  every RULE finding has a provenance stack WHAT (e.g.
                                               "exception thrown") whose first frame is FUNCTION:LINE
  // rank-symbolized: RULE FUNCTION FILE         in the rank reports as written (before any offline
                                               symbolization), every RULE finding's site was named
                                               in-process: FUNCTION in FILE, with a line, and so
                                               was the first frame of each of its stacks
  // rank-symbolized: none                       no rank report names any frame (no rank finalized)
  // env: NAME=VALUE ...                         extra environment for the case's runs (under
                                               attrcheck and native)
  // native-skip: STATUS[, STATUS]               a native run comes first: if it ends with STATUS
                                               (the program found that the library cannot do
                                               here what the case needs, and said why on
                                               stderr), the case is skipped (ctest: skipped)
                                               with that reason; any other failure fails it.
                                               Where the library does so only now and then (an
                                               abort in it that some runs escape), a run under
                                               attrcheck ending with STATUS is followed by up to
                                               NATIVE_RETRIES new native runs: one ending with
                                               STATUS too skips the case, saying so; if none
                                               does, the case fails
  // gathered-left: RANK[,RANK]                 where rank 0 wrote the gathered report (the launcher
                                               did not end the job first), it says the gather did
                                               not wait for exactly these ranks (they had ended)
  // hangs-on RELEASE: REASON                    on that library or release series the MPI library
                                               may leave the job hanging, natively too (REASON: the
                                               evidence): a run still going after HANG_SECONDS is
                                               ended as a batch system would (SIGTERM to the
                                               launcher), and every check then applies to what the
                                               run left
  // skip-on LIBRARY: REASON                     the case cannot run on that library or release series
                                               (openmpi, openmpi-5.0: mpi_profile.def; ctest: skipped);
                                               standard-abi: the case is not built for the MPI
                                               standard ABI (tests/mpi/CMakeLists.txt reads it too);
                                               mpich-standard-abi (any LIBRARY-standard-abi): its
                                               run for the standard ABI on that library
  // expect-intercepted: FAMILY.BINDING=N ...    the merged report's "intercepted" count of that
                                               family and binding is N (or, with >=N, at least N)
  // status: STATUS                              every rank's status in the merged report
  // expect-ranks: RULE 1,3                      the RULE findings happened on exactly these ranks
  // expect-count: RULE N                        the RULE findings' counts add up to N
  // expect-files: NAME...                       once the run ends, the output directory holds
                                               exactly these files
  // expect-created: NAME...                     while it runs, no file is created in the output
                                               directory but these (and hidden temporaries
                                               renamed onto them: .NAME...tmp, .attrcheck-...tmp)
  // expect-unless FLAG: RULE...                 expected unless the library profile's FLAG is true
  // expect-if FLAG: RULE...                     expected only if it is (FLAG: a library field, or a
                                               BEHAVIOUR the release has, as its probe answered)
  // expect-on LIBRARY[/MODE]: RULE...           expected only on that library or release series
                                               (openmpi, mpich-4.2, or standard-abi: a run of the
                                               program built for the standard ABI, --standard-abi),
                                               and only in MODE if given:
                                               where the program itself runs into what differs
  // expect-portable-on TARGET[/MODE]: RULE SERIES...
                                               on that library or release series (as expect-on),
                                               a RULE finding (portability.*) names exactly these
                                               release series as where the program would behave
                                               otherwise ('differs_on')
  // portable-to: SERIES,...                     run with --portable-to SERIES,...
  // expect-severity: RULE SEVERITY              every RULE finding has this severity
  // gate-fails-on: SEVERITY                     `attrcheck-report gate --fail-on SEVERITY` fails on
                                               the merged report (exit 1)
  // divergence: ID...                           known library divergences (src/runtime/profile/mpi_profile.def)
                                               the program runs into: where the built library's
                                               profile lists one, shadow mode must say so in one
                                               library.divergence note (info) naming it, never as
                                               impl.divergence at a call site; elsewhere no note.
                                               ID? : the note may be missing from a run (what the
                                               library does by chance: a wrong handle whose
                                               arbitrary value can be the right one)

The program runs under the MPI library's own launcher (mpiexec.mpich for an MPICH build), as the
build recorded it (tests/mpi_config.py). With --standard-abi the program is one built for the MPI
standard ABI: it runs on the build's library's libmpi_abi (chosen by LD_LIBRARY_PATH), must be
checked by the standard ABI build, and is skipped where that libmpi_abi lacks a function it calls.

usage: run_case.py [--standard-abi] --launcher BIN --build DIR --exe PROGRAM --source CASE.c --mode MODE --workdir DIR
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import report_files  # noqa: E402
import jsonschema  # noqa: E402  (Debian's python3-jsonschema)

with open(os.path.join(HERE, "..", "..", "reports", "attrcheck-report.schema.json")) as _f:
    SCHEMA = jsonschema.Draft202012Validator(json.load(_f))


def schema_errors(path, data=None):
    """Every report the suite produces must match the published schema (a journal: the report
    attrcheck-report merges from it)."""
    if data is None:
        with open(path) as f:
            data = json.load(f)
    return [f"{path}: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in SCHEMA.iter_errors(data)][:5]


def report_errors(tool, path):
    """Problems of a report the run wrote: attrcheck-report must read it (a journal: merged into
    a report), and what it is must match the schema."""
    if path.endswith(".journal"):
        fd, merged = tempfile.mkstemp(prefix="attrcheck-journal-", suffix=".json")
        os.close(fd)
        try:
            p = subprocess.run([tool, "--no-default-suppressions", "merge", path, "-o", merged, "--force"],
                               capture_output=True, text=True, timeout=TIMEOUT)
            return [p.stderr.strip()] if p.returncode != 0 else schema_errors(merged)
        finally:
            os.unlink(merged)
    p = subprocess.run([tool, "--no-default-suppressions", "gate", "--fail-on", "info", path],
                       capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode not in (0, 1):
        return [p.stderr.strip()]
    return schema_errors(path)

import mpi_config  # noqa: E402

TIMEOUT = 120


def finding_places(finding, stacks):
    """'file.f90:12' for the finding's site and each symbolized frame of its stack and its
    provenance's stacks (`stacks`: the report's depot, id -> frames)."""
    frames = [finding.get("site") or {}]
    ids = [finding.get("stack")] + [p.get("stack") for p in finding.get("provenance") or []]
    for i in ids:
        frames += stacks.get(i, [])
    return [f"{os.path.basename(f['file'])}:{f['line']}" for f in frames if f.get("file") and f.get("line")]


def at_matches(at, place):
    """expect-at's FILE:LINE or FILE:FIRST-LAST against a symbolized 'file:line'."""
    file, _, lines = at.rpartition(":")
    pfile, _, pline = place.rpartition(":")
    first, _, last = lines.partition("-")
    return file == pfile and int(first) <= int(pline) <= int(last or first)


def _named(frame, function, file):
    return (frame.get("symbolized") is True and frame.get("function") == function
            and os.path.basename(frame.get("file", "")) == file and frame.get("line", 0) > 0)


def rank_symbolization_failures(out, want):
    """What the reports the ranks wrote (not what the launcher named again) say of in-process
    symbolization (src/report/symbolize.hpp): `want` is ["none"] or [RULE, FUNCTION, FILE]. The
    ranks' own reports where they wrote them; else the job's report, whose frames rank 0 named
    when it gathered them (the launcher's pass never marks a frame "symbolized")."""
    failures, seen = [], 0
    paths = [p for p in report_files.rank_files(out) if not p.endswith(".journal")]  # journals: never named
    merged = not paths
    if merged:
        paths = [os.path.join(out, "report.json")]
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        stacks = {s["id"]: s.get("frames", []) for s in data.get("stacks", [])}
        if want == ["none"]:
            frames = [f.get("site", {}) for f in data["findings"]] + [fr for s in stacks.values() for fr in s]
            named = [fr for fr in frames if "symbolized" in fr or ("function" in fr and not merged)]
            if named:
                failures.append(f"{path}: frames named in-process, expected none: {named[:3]}")
            continue
        rule, function, file = want
        for f in data["findings"]:
            if f["rule"] != rule:
                continue
            seen += 1
            site = f.get("site", {})
            if not _named(site, function, file) or (merged and not site.get("symbolized")):
                failures.append(f"{path}: {rule} site not named {function} in {file} in-process: {f.get('site')}")
            for ref in [f] + f.get("provenance", []):
                frames = stacks.get(ref.get("stack"), [])
                if frames and not (frames[0].get("symbolized") and frames[0].get("file") and frames[0].get("line")):
                    failures.append(f"{path}: {rule} stack {ref.get('stack')} not named in-process: {frames[0]}")
    if want != ["none"] and not seen:
        failures.append(f"no rank report has a {want[0]} finding to check in-process symbolization on")
    return failures


class CreatedFiles:
    """The names of the files created in (or renamed into) a directory from now on, as inotify(7)
    tells them."""
    IN_CREATE, IN_MOVED_TO, IN_NONBLOCK, IN_CLOEXEC = 0x100, 0x80, 0o4000, 0o2000000

    def __init__(self, directory):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK | self.IN_CLOEXEC)
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, directory.encode(),
                                                      self.IN_CREATE | self.IN_MOVED_TO) < 0:
            raise OSError(ctypes.get_errno(), "inotify")

    def names(self):
        import struct
        data = b""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        os.close(self.fd)
        out, i = [], 0
        while i + 16 <= len(data):
            _, mask, _, length = struct.unpack_from("iIII", data, i)
            name = data[i + 16:i + 16 + length].split(b"\0", 1)[0].decode(errors="replace")
            if mask & self.IN_CREATE:
                out.append(name)
            i += 16 + length
        return out


def header(source):
    spec = {"np": 2, "modes": ["shadow", "emulate"], "expect": [], "clean": False, "exit": "0", "native": None,
            "env": {}, "divergence": [], "intercepted": [], "expect_unless": [], "expect_if": [], "status": None,
            "processes": None, "everywhere": [], "messages": [], "where": [], "at": [], "provenance": [],
            "skip_on": {}, "rank_symbolized": [], "expect_on": [], "native_skip": None, "hangs_on": {}, "ranks": [], "counts": [],
            "files": None, "created": None, "gathered_left": None, "portable_on": [], "portable_to": None,
            "severities": [], "gate_fails_on": None}
    with open(source) as f:
        for line in f:
            line = line.strip()
            if line.startswith("//"):
                body = line[2:].strip()
            elif line.startswith("!"):
                body = line[1:].strip()
            else:
                break
            if body.startswith("attrcheck-test:"):
                for item in body.split(":", 1)[1].split():
                    key, _, value = item.partition("=")
                    if key == "np":
                        spec["np"] = int(value)
                    elif key == "modes":
                        spec["modes"] = value.split(",")
            elif body.startswith("expect:"):
                spec["expect"] += body.split(":", 1)[1].split()
            elif body == "clean":
                spec["clean"] = True
            elif body.startswith("exit:"):
                spec["exit"] = body.split(":", 1)[1].strip()
            elif body.startswith("expect-unless "):
                flag, _, rules = body[len("expect-unless "):].partition(":")
                spec["expect_unless"].append((flag.strip(), rules.split()))
            elif body.startswith("expect-if "):
                flag, _, rules = body[len("expect-if "):].partition(":")
                spec["expect_if"].append((flag.strip(), rules.split()))
            elif body.startswith("expect-intercepted:"):
                spec["intercepted"] += body.split(":", 1)[1].split()
            elif body.startswith("divergence:"):
                spec["divergence"] = body.split(":", 1)[1].split()
            elif body.startswith("status:"):
                spec["status"] = body.split(":", 1)[1].strip()
            elif body.startswith("native:"):
                spec["native"] = body.split(":", 1)[1].strip()
            elif body.startswith("expect-ranks:"):
                rule, ranks = body.split(":", 1)[1].split()
                spec["ranks"].append((rule, sorted(int(r) for r in ranks.split(","))))
            elif body.startswith("expect-count:"):
                rule, n = body.split(":", 1)[1].split()
                spec["counts"].append((rule, int(n)))
            elif body.startswith("expect-files:"):
                spec["files"] = sorted(body.split(":", 1)[1].split())
            elif body.startswith("expect-created:"):
                spec["created"] = sorted(body.split(":", 1)[1].split())
            elif body.startswith("gathered-left:"):
                spec["gathered_left"] = sorted(int(r) for r in body.split(":", 1)[1].split(","))
            elif body.startswith("expect-processes:"):
                spec["processes"] = int(body.split(":", 1)[1])
            elif body.startswith("expect-everywhere:"):
                spec["everywhere"] += body.split(":", 1)[1].split()
            elif body.startswith("expect-message:"):
                rule, _, text = body.split(":", 1)[1].strip().partition(" ")
                spec["messages"].append((rule, text.strip()))
            elif body.startswith("expect-where:"):
                rule, function = body.split(":", 1)[1].split()
                spec["where"].append((rule, function))
            elif body.startswith("expect-at:"):
                rule, at = body.split(":", 1)[1].split()
                spec["at"].append((rule, at))
            elif body.startswith("expect-provenance:"):
                rule, at, what = body.split(":", 1)[1].strip().split(None, 2)
                spec["provenance"].append((rule, at, what))
            elif body.startswith("rank-symbolized:"):
                spec["rank_symbolized"].append(body.split(":", 1)[1].split())
            elif body.startswith("expect-portable-on "):
                target, _, rest = body[len("expect-portable-on "):].partition(":")
                rule, *series = rest.split()
                spec["portable_on"].append((target.strip(), rule, sorted(series)))
            elif body.startswith("portable-to:"):
                spec["portable_to"] = body.split(":", 1)[1].strip()
            elif body.startswith("expect-severity:"):
                rule, severity = body.split(":", 1)[1].split()
                spec["severities"].append((rule, severity))
            elif body.startswith("gate-fails-on:"):
                spec["gate_fails_on"] = body.split(":", 1)[1].strip()
            elif body.startswith("expect-on "):
                library, _, rules = body[len("expect-on "):].partition(":")
                spec["expect_on"].append((library.strip(), rules.split()))
            elif body.startswith("hangs-on "):
                library, _, reason = body[len("hangs-on "):].partition(":")
                spec["hangs_on"][library.strip()] = reason.strip()
            elif body.startswith("skip-on "):
                library, _, reason = body[len("skip-on "):].partition(":")
                spec["skip_on"][library.strip()] = reason.strip()
            elif body.startswith("native-skip:"):
                spec["native_skip"] = {int(v) for v in body.split(":", 1)[1].split(",")}
            elif body.startswith("env:"):
                for item in body.split(":", 1)[1].split():
                    name, _, value = item.partition("=")
                    spec["env"][name] = value
    return spec


HANG_SECONDS = 40


def run_ended_if_hung(cmd, env, cwd, hang_reason):
    """Runs the command; where the library may hang the job (hangs-on), one still running after
    HANG_SECONDS gets SIGTERM, as from a batch system's time limit, and the launcher ends the job."""
    if hang_reason is None:
        return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    with subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        try:
            out, err = p.communicate(timeout=HANG_SECONDS)
        except subprocess.TimeoutExpired:
            p.terminate()
            out, err = p.communicate(timeout=TIMEOUT)
            print(f"the job still ran after {HANG_SECONDS} s and was ended with SIGTERM (exit {p.returncode}): "
                  f"{hang_reason}")
        return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def exit_ok(expected, status):
    if expected == "any":
        return True
    if expected == "0":
        return status == 0
    if expected == "nonzero":
        return status != 0
    if expected == "signal":
        return status != 0  # mpirun turns a rank's signal into a non-zero status
    return str(status) == expected


SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests

# A failing run's evidence outlives the next run of the case (which empties the workdir first):
# WORKDIR.failed/STAMP/ holds log.txt (the command, its status, stdout and stderr, the native run's,
# the failures) and a copy of the run's report directory. A flake seen once under load can then
# still be read after a rerun passed. The newest KEEP_FAILED of a case are kept.
KEEP_FAILED = 5


def _text(data):
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def keep_failure(workdir, log):
    """Where the failure was kept (or why it could not be: the test fails all the same)."""
    root = workdir.rstrip("/") + ".failed"
    try:
        os.makedirs(root, exist_ok=True)
        now = time.time_ns()  # (names sort in the order the failures were kept)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now // 10**9)) + f".{now % 10**9:09d}-"
        dest = tempfile.mkdtemp(prefix=stamp, dir=root)
        with open(os.path.join(dest, "log.txt"), "w") as f:
            f.write(log)
        out = os.path.join(workdir, "out")
        if os.path.isdir(out):
            shutil.copytree(out, os.path.join(dest, "out"), symlinks=True)
        for old in sorted(os.listdir(root))[:-KEEP_FAILED]:
            shutil.rmtree(os.path.join(root, old), ignore_errors=True)
    except OSError as e:
        return f"nothing ({e})"
    return dest


def run_log(cmd, proc, native, failures):
    """log.txt of keep_failure: what a failing run printed and why it failed."""
    parts = ["$ " + " ".join(cmd)]
    if proc is not None:
        parts += [f"exit status {proc.returncode}", "--- stdout", _text(proc.stdout), "--- stderr", _text(proc.stderr)]
    if native is not None:
        parts += [f"--- native run: exit status {native.returncode}", "--- native stdout", _text(native.stdout),
                  "--- native stderr", _text(native.stderr)]
    parts += ["--- failures"] + [f"FAIL: {f}" for f in failures]
    return "\n".join(parts) + "\n"


# How many native runs more a case with native-skip makes when its run under attrcheck ended with
# a skip status its first native run did not (native-skip above).
NATIVE_RETRIES = 10


def native_run(a, mpirun, env):
    """The program's native run (no attrcheck), made once per build of the case: its modes' tests
    share it, as its stdout and status do not depend on the mode that compares them. Kept beside
    the workdirs as NAME.native.json, keyed by the program's and its libraries' files and the
    command and environment it ran with; a failed run is never kept, so a rerun makes it again.
    Tests of the case's modes that run at once wait on the file's lock for the first one's run."""
    import fcntl
    import hashlib
    files = [a.exe]  # the program and the libraries it loads (an upgraded MPI library: a new run)
    ldd = subprocess.run(["ldd", a.exe], env=env, capture_output=True, text=True)
    files += re.findall(r"=> (/\S+)", ldd.stdout)
    stats = [(os.path.realpath(f), st.st_size, st.st_mtime_ns)
             for f in files if os.path.exists(f) for st in [os.stat(f)]]
    key = hashlib.sha256(json.dumps([stats, mpirun, sorted(env.items())]).encode()).hexdigest()
    name = os.path.basename(a.workdir.rstrip("/")).rsplit(".", 1)[0]
    path = os.path.join(os.path.dirname(a.workdir.rstrip("/")), name + ".native.json")
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path) as f:
                kept = json.load(f)
            if kept.get("key") == key:
                print(f"native run: the one made for this build ({path})")
                return subprocess.CompletedProcess(mpirun, kept["returncode"], kept["stdout"], kept["stderr"])
        except (OSError, ValueError):
            pass
        native = subprocess.run(mpirun, env=env, cwd=a.workdir, capture_output=True, text=True, timeout=TIMEOUT)
        if native.returncode == 0:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"key": key, "returncode": native.returncode, "stdout": native.stdout,
                           "stderr": native.stderr}, f)
            os.replace(tmp, path)
        return native


def abi_symbols_lacking(exe, library):
    """The MPI functions the program needs that `library` does not define (Open MPI's libmpi_abi
    leaves out the MPI-1 caching calls), by the dynamic symbol tables (nm -D)."""
    lacking = mpi_config.dynamic_symbols(exe, undefined=True) - mpi_config.dynamic_symbols(library)
    return sorted(s for s in lacking if re.match(r"P?MPIX?_", s))


def main():
    ap = argparse.ArgumentParser()
    for a in ("--launcher", "--build", "--exe", "--source", "--mode", "--workdir"):
        ap.add_argument(a, required=True)
    ap.add_argument("--standard-abi", action="store_true",
                    help="the program is built for the MPI standard ABI (libmpi_abi.so.1): run it on the "
                         "build's library's libmpi_abi, under its profile with what the ABI fixes")
    a = ap.parse_args()
    try:
        return check_case(a)
    except Exception as e:  # a timeout, a report that cannot be read: kept too, then raised
        log = traceback.format_exc()
        if isinstance(e, subprocess.TimeoutExpired):
            log += f"--- stdout so far\n{_text(e.stdout)}--- stderr so far\n{_text(e.stderr)}"
        print(f"kept in {keep_failure(a.workdir, log)}", file=sys.stderr)
        raise


def check_case(a):
    spec = header(a.source)
    cfg = mpi_config.load(a.build)
    targets = (cfg.library, cfg.release)
    if a.standard_abi:
        cfg.for_standard_abi()
        targets += ("standard-abi", f"{cfg.library}-standard-abi", f"{cfg.release}-standard-abi")
    for target in targets:
        if target in spec["skip_on"]:
            print(f"skipped on {target}: {spec['skip_on'][target]}")
            return SKIP
    profiles = mpi_config.profiles()
    maybe = {d.rstrip("?") for d in spec["divergence"] if d.endswith("?")}
    spec["divergence"] = [d.rstrip("?") for d in spec["divergence"]]
    for d in spec["divergence"]:
        if not any(d in p["divergences"] for p in profiles.values()):
            print(f"FAIL: {os.path.basename(a.source)} names divergence {d}, which no profile defines", file=sys.stderr)
            return 1
    # The known divergences this program runs into on the built library.
    diverges = [d for d in spec["divergence"] if d in cfg.divergences]
    # (emulate mode serves the calls itself: the library's behaviour is not compared)
    named = diverges if a.mode == "shadow" else []
    for flag, rules, wanted in ([(f, r, False) for f, r in spec["expect_unless"]] +
                                [(f, r, True) for f, r in spec["expect_if"]]):
        if not isinstance(cfg.profile.get(flag), bool):
            print(f"FAIL: expect-{'if' if wanted else 'unless'} names {flag}, which is no profile flag", file=sys.stderr)
            return 1
        if cfg.profile[flag] != wanted:
            print(f"not expected on {cfg.profile['name']} ({flag}: {cfg.profile[flag]}): {' '.join(rules)}")
        else:
            spec["expect"] = spec["expect"] + rules
    for target, rules in spec["expect_on"]:
        library, _, mode = target.partition("/")
        if library.removesuffix("standard-abi").removesuffix("-") not in profiles and library != "standard-abi":
            print(f"FAIL: expect-on names {library}, which is no library or release profile", file=sys.stderr)
            return 1
        if library in targets and mode in ("", a.mode):
            spec["expect"] = spec["expect"] + rules
    portable = []  # (rule, series) this run must name
    for target, rule, series in spec["portable_on"]:
        library, _, mode = target.partition("/")
        if library.removesuffix("standard-abi").removesuffix("-") not in profiles and library != "standard-abi":
            print(f"FAIL: expect-portable-on names {library}, which is no library or release profile", file=sys.stderr)
            return 1
        if library in targets and mode in ("", a.mode):
            portable.append((rule, series))
            spec["expect"] = spec["expect"] + [rule]
    if spec["exit"] == "without-finalize":
        spec["exit"] = cfg.profile["exit_without_finalize"]
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    extra = dict(spec["env"])
    if a.standard_abi:
        extra.update(cfg.standard_abi_env(os.path.join(a.workdir, "libmpi_abi")))
        lacking = abi_symbols_lacking(a.exe, cfg.standard_abi_library())
        if lacking:
            print(f"skipped on {cfg.profile['name']}: its libmpi_abi ({cfg.standard_abi_library()}) does not "
                  f"define {', '.join(lacking)}, which the program refers to: natively it cannot run there")
            return SKIP
    env = cfg.env(**extra)
    out = os.path.join(a.workdir, "out")
    mpirun = cfg.mpiexec(spec["np"], a.exe)
    failures = []
    native = None
    if spec["native_skip"] is not None:
        native = native_run(a, mpirun, env)
        if native.returncode in spec["native_skip"]:
            print(f"skipped on {cfg.profile.get('name', cfg.library)}: natively the program ends with "
                  f"{native.returncode}, saying:\n" + native.stderr[-3000:])
            return SKIP
        if native.returncode != 0:
            failures.append(f"native run failed with {native.returncode}: {native.stderr[-2000:]}")
    cmd = [a.launcher, "--mode", a.mode, "--output", out, "--fail-on", "never"]
    if spec["portable_to"]:
        cmd += ["--portable-to", spec["portable_to"]]
    cmd += ["--"] + mpirun
    watch = None
    if spec["created"] is not None:
        os.makedirs(out)
        watch = CreatedFiles(out)
    hang = next((spec["hangs_on"][t] for t in (cfg.library, cfg.release) if t in spec["hangs_on"]), None)
    proc = run_ended_if_hung(cmd, env, a.workdir, hang)
    if watch is not None:
        created = watch.names()
        temporary = re.compile(r"\.(" + "|".join(re.escape(n) for n in spec["created"]) + r"|attrcheck-)\S*\.tmp")
        others = sorted(n for n in created if n not in spec["created"] and not temporary.fullmatch(n))
        if others:
            failures_before = [f"files created in the output directory besides {spec['created']}: {others}"]
        else:
            failures_before = []
    else:
        failures_before = []
    print("$ " + " ".join(cmd))
    print(proc.stdout)
    print(proc.stderr, file=sys.stderr)
    if spec["native_skip"] is not None and proc.returncode in spec["native_skip"] and \
            not exit_ok(spec["exit"], proc.returncode):
        # The native run passed, this one did not, as the library may natively: is it the library?
        for attempt in range(1, NATIVE_RETRIES + 1):
            again = subprocess.run(mpirun, env=env, cwd=a.workdir, capture_output=True, text=True, timeout=TIMEOUT)
            if again.returncode in spec["native_skip"]:
                print(f"skipped on {cfg.profile.get('name', cfg.library)}: under attrcheck the program ended with "
                      f"{proc.returncode}, and so did native run {attempt + 1} (the first {attempt} passed), "
                      f"saying:\n" + again.stderr[-3000:])
                return SKIP
        failures.append(f"natively the program passed {NATIVE_RETRIES + 1} times, under attrcheck it ended with "
                        f"{proc.returncode}")
    if not exit_ok(spec["exit"], proc.returncode):
        failures.append(f"exit status {proc.returncode}, expected {spec['exit']}")
    failures.extend(failures_before)
    if spec["files"] is not None:
        left = sorted(os.listdir(out)) if os.path.isdir(out) else []
        if left != spec["files"]:
            failures.append(f"the output directory holds {left}, expected {spec['files']}")

    # Every per-rank report must parse (a crashed rank too: its journal, through attrcheck-report),
    # and the merged one must exist.
    tool = os.path.join(os.path.dirname(os.path.abspath(a.launcher)), "attrcheck-report")
    for path in report_files.rank_files(out):
        failures.extend(report_errors(tool, path))
    merged = {"findings": [], "ranks": []}
    problems = report_errors(tool, os.path.join(out, "report.json"))
    failures.extend(problems)
    if not problems:
        with open(os.path.join(out, "report.json")) as f:
            merged = json.load(f)
    rules = {f["rule"] for f in merged["findings"]}
    for rule in spec["expect"]:
        if rule not in rules:
            failures.append(f"expected rule {rule} not reported (got: {sorted(rules) or 'nothing'})")
    if spec["clean"]:
        for f in merged["findings"]:
            if f["severity"] in ("error", "warning") and f["rule"] not in spec["expect"]:
                failures.append(f"unexpected {f['severity']} {f['rule']}: {f['message']}")
    # A known divergence is a note about the library: once per run and id, at info, at no call site.
    notes = [f for f in merged["findings"] if f["rule"] == "library.divergence"]
    for d in named:
        mine = [f for f in notes if f"[{d}]" in f["message"]]
        if not mine and d in maybe:
            print(f"[{d}] not seen in this run (allowed: the library does it by chance)")
        elif not mine:
            failures.append(f"no library.divergence note names [{d}] (notes: {[f['message'] for f in notes]})")
        elif len(mine) > 1 or (mine[0].get("site") or {}).get("address", "0x0") != "0x0":
            failures.append(f"[{d}] is noted {len(mine)} times, or at a call site: {mine}")
    if a.standard_abi:
        # The run was checked by the standard ABI build (the launcher's choice): a native build
        # would have forwarded every call, intercepting none (a rank's finalized report counts
        # them; a killed rank's journal does not), finding nothing, and said tool.other-mpi.
        if "tool.other-mpi" in rules or not (merged.get("intercepted") or rules):
            failures.append(f"the run was not checked by the standard ABI build (rules {sorted(rules)}, "
                            f"intercepted {merged.get('intercepted')})")
    for f in notes:
        if f["severity"] != "info" or not any(f"[{d}]" in f["message"] for d in named):
            failures.append(f"unexpected library note: {f['severity']} {f['message']}")
    known = set(cfg.divergences)
    for f in merged["findings"]:
        if f["rule"] == "impl.divergence" and any(f"[{d}]" in f["message"] for d in known):
            failures.append(f"a known divergence reported at a call site: {f['message']}")
    for want in spec["intercepted"]:
        m = re.fullmatch(r"([a-z]+)\.([a-z0-9]+)(>?=)(\d+)", want)
        if not m:
            failures.append(f"expect-intercepted: cannot read {want}")
            continue
        got = (merged.get("intercepted") or {}).get(m.group(1), {}).get(m.group(2))
        if got is None or (got != int(m.group(4)) if m.group(3) == "=" else got < int(m.group(4))):
            failures.append(f"intercepted {m.group(1)}.{m.group(2)} is {got}, expected {m.group(3)}{m.group(4)} "
                            f"(intercepted: {merged.get('intercepted')})")
    for rule, want in spec["ranks"]:
        got = sorted({r for f in merged["findings"] if f["rule"] == rule
                      for r in report_files.rank_list(f.get("ranks", []))})
        if got != want:
            failures.append(f"{rule} reported on ranks {got}, expected {want}")
    for rule, want in spec["counts"]:
        got = sum(f.get("count", 1) for f in merged["findings"] if f["rule"] == rule)
        if got != want:
            failures.append(f"{rule} counted {got} times, expected {want}")
    statuses = [r.get("status") for _, r in report_files.rank_entries(merged)]
    if spec["status"] and (len(statuses) != spec["np"] or any(s != spec["status"] for s in statuses)):
        failures.append(f"rank statuses {statuses}, expected {spec['np']} x {spec['status']}")
    if spec["processes"] is not None:
        everyone = [p for p, _ in report_files.rank_entries(merged)]
        if len(everyone) != spec["processes"] or len(set(everyone)) != len(everyone):
            failures.append(f"expected {spec['processes']} rank reports of distinct processes, got "
                            f"{len(everyone)}: {everyone}")
    if spec["gathered_left"] is not None:
        # Checked where rank 0 got to write the gathered report (a launcher may end the job first).
        gathers = merged.get("gathers") or []
        if gathers:
            left = sorted(set().union(*[g.get("left", []) for g in gathers]))
            if left != spec["gathered_left"]:
                failures.append(f"the gather did not wait for ranks {left}, expected {spec['gathered_left']}")
        else:
            print("the launcher ended the job before rank 0 wrote the gathered report: gathered-left not checked")
    for rule in spec["everywhere"]:
        found = set().union(*[report_files.processes(f) for f in merged["findings"] if f["rule"] == rule])
        missing = [p for p, _ in report_files.rank_entries(merged) if p not in found]
        if missing:
            failures.append(f"{rule} not reported on processes (job, rank) {missing}")
    for rule, text in spec["messages"]:
        if not any(f["rule"] == rule and text in f.get("message", "") for f in merged["findings"]):
            failures.append(f"no {rule} finding says '{text}' (got: "
                            f"{[f.get('message') for f in merged['findings'] if f['rule'] == rule]})")
    for rule, series in portable:
        named = [sorted((f.get("portability") or {}).get("differs_on", [])) for f in merged["findings"]
                 if f["rule"] == rule]
        if series not in named:
            failures.append(f"no {rule} finding names exactly {series} (got {named})")
    for rule, severity in spec["severities"]:
        got = sorted({f.get("severity") for f in merged["findings"] if f["rule"] == rule})
        if got != [severity]:
            failures.append(f"{rule} findings should be {severity}, are {got}")
    if spec["gate_fails_on"]:
        g = subprocess.run([tool, "gate", "--fail-on", spec["gate_fails_on"], os.path.join(out, "report.json")],
                           capture_output=True, text=True, timeout=TIMEOUT)
        if g.returncode != 1:
            failures.append(f"attrcheck-report gate --fail-on {spec['gate_fails_on']} exited {g.returncode}, "
                            f"expected 1: {g.stdout[-500:]}{g.stderr[-500:]}")
    for rule, function in spec["where"]:
        sites = [(f.get("site") or {}).get("function") for f in merged["findings"] if f["rule"] == rule]
        if not sites or any(s != function for s in sites):
            failures.append(f"{rule} should be at {function}, is at {sites}")
    for rule, at in spec["at"]:
        stacks = {st["id"]: st["frames"] for st in merged.get("stacks") or []}
        places = [place for f in merged["findings"] if f["rule"] == rule for place in finding_places(f, stacks)]
        if not any(at_matches(at, place) for place in places):
            failures.append(f"{rule} should be at {at}, is at {sorted(set(places))}")
    stacks = {st["id"]: st.get("frames", []) for st in merged.get("stacks", [])}
    for rule, at, what in spec["provenance"]:
        for f in [f for f in merged["findings"] if f["rule"] == rule] or [{}]:
            firsts = [(stacks.get(p.get("stack")) or [{}])[0] for p in f.get("provenance", []) if p.get("what") == what]
            named = [f"{fr.get('function')}:{fr.get('line')}" for fr in firsts]
            if at not in named:
                failures.append(f"{rule} should have provenance '{what}' at {at}, has {named}")
    for want in spec["rank_symbolized"]:
        failures.extend(rank_symbolization_failures(out, want))
    if spec["exit"] == "signal" and not any(r.get("status") == "signal" for r in merged.get("ranks", [])):
        failures.append("no rank report says it ended by a signal")

    if spec["native"] == "same-stdout" and diverges and a.mode == "emulate":
        # Emulate mode serves the standard's semantics, which this library departs from here.
        print(f"skip native comparison: {cfg.profile['name']} diverges from the standard here "
              f"({', '.join(diverges)}) and emulate mode follows the standard")
    elif spec["native"] == "same-stdout":
        native = native or native_run(a, mpirun, env)  # (native-skip's run, if the case made one)
        if native.returncode != 0:
            failures.append(f"native run failed with {native.returncode}: {native.stderr[-500:]}")
        if native.stdout != proc.stdout:
            failures.append("stdout differs from the native run:\n--- native\n" + native.stdout +
                            "--- under attrcheck\n" + proc.stdout)

    if failures:
        print(json.dumps(merged.get("findings", []), indent=1)[:4000], file=sys.stderr)
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        print(f"kept in {keep_failure(a.workdir, run_log(cmd, proc, native, failures))}", file=sys.stderr)
        return 1
    print(f"ok: {os.path.basename(a.source)} [{a.mode}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
