#!/usr/bin/env python3
"""Differential random-program tester of attrcheck.

Generates legal C programs over keyvals, attributes and callbacks (program.py), compiles each
once with the build's MPI compiler, runs it natively and under `attrcheck --mode shadow` and
`--mode emulate`, and compares the canonicalised traces with each other and with the model
(model.py), and the reports' findings with what the program deserves:

  native  vs the library's model   a difference is a library divergence (recorded, not a failure)
  shadow  vs native and the model  shadow forwards to the library: a difference from both is attrcheck's
  emulate vs the standard's model  (with the release's BEHAVIOURs) a difference is attrcheck's
  findings                          none at warning or error on a legal program (deprecated.call
                                    for each deprecated call it makes); info notes are recorded
  exit status                       0 everywhere

Seeded programs carry exactly one erroneous call of one rule (program.SEEDABLE); both modes must
report exactly that rule at warning or error. A failing program is shrunk (delta debugging over
its body; the epilogue is derived again) and written out as a standalone C file describing the
failure at its top.

usage: fuzz.py --build DIR [--standard-abi] [--legal N] [--seeded M] [--ranks 1,2] [--seed S] [--jobs 2]
               [--out DIR] [--avoid ID,...] [--strict] [--no-shrink] [--inject model|finding]
exit status: 0 no attrcheck failure (known ones excepted), 1 attrcheck failures, 2 the tester itself failed
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import mpi_config  # noqa: E402
import model as M  # noqa: E402
import program as P  # noqa: E402
from known import KNOWN  # noqa: E402

TIMEOUT = 120
MODES = ("native", "shadow", "emulate")
DEPRECATED = {"MPI_Keyval_create", "MPI_Keyval_free", "MPI_Attr_put", "MPI_Attr_get", "MPI_Attr_delete"}


# ---- the build and how programs run ----

class Build:
    def __init__(self, build, standard_abi=False):
        self.dir = os.path.abspath(build)
        self.cfg = mpi_config.load(self.dir)
        self.standard_abi = standard_abi
        self.launcher = os.path.join(self.dir, "bin", "attrcheck")
        self.cc = None
        cache = os.path.join(self.dir, "CMakeCache.txt")
        if os.path.exists(cache):
            for line in open(cache):
                if line.startswith("MPI_C_COMPILER:"):
                    self.cc = line.split("=", 1)[1].strip()
        if not self.cc:
            self.cc = "mpicc.mpich" if self.cfg.library == "mpich" else "mpicc"
        self.env = self.cfg.env()
        # Whether the programs may make the deprecated MPI-1 calls: every native library has them;
        # of the standard ABI's, MPICH's has and Open MPI's has not.
        self.deprecated_calls = True
        if standard_abi:
            # The programs are built for the MPI standard ABI and run on this build's library's
            # libmpi_abi, which the launcher checks with the standard ABI build.
            if not self.cfg.standard_abi_program or not self.cfg.standard_abi_library():
                raise RuntimeError(f"the build has no standard ABI build for {self.cfg.library} "
                                   "(lib/libattrcheck_abi.so and the library's libmpi_abi)")
            self.cfg.for_standard_abi()
            self.env = self.cfg.env(**self.cfg.standard_abi_env(os.path.join(self.dir, "fuzz-libmpi_abi")))
            self.deprecated_calls = self.cfg.standard_abi_defines("MPI_Keyval_create")
        self.profile = self.cfg.profile

    def compile(self, src, exe):
        if self.standard_abi:
            cmd = self.cfg.standard_abi_compile(src, exe, "-g", "-O0", "-w")
        else:
            cmd = [self.cc, "-g", "-O0", "-w", "-o", exe, src]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd[0]} {src}: {p.stderr.strip()[:2000]}")

    def command(self, exe, trace, np, mode, out):
        """A native run at 1 rank is a singleton (no mpiexec); at 2 ranks mpiexec starts it."""
        cmd = [exe, trace] if np == 1 else self.cfg.mpiexec(np, exe, trace)
        if mode == "native":
            return cmd
        return [self.launcher, "--mode", mode, "--output", out, "--fail-on", "never", "--"] + cmd


def series_of(version_line, build):
    """The release profile named by a trace's '# library' line, as mpi_profile.def maps it."""
    text = version_line or ""
    if "Open MPI" in text:
        lib, m = "openmpi", re.search(r"v(\d+(?:\.\d+)+)", text)
    elif "MPICH" in text:
        lib, m = "mpich", re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    else:
        return build.profile
    return mpi_config.release_for(lib, m.group(1) if m else "") or build.profile


# ---- traces ----

def read_traces(prefix, np):
    out = {}
    for r in range(np):
        path = f"{prefix}.{r}"
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                out[r] = f.read().splitlines()
    return out


def canon(lines):
    """[(op line, (callback and nested lines...))]: each of the program's calls with the lines its
    callbacks printed, sorted where the standard leaves the order open (everything but
    MPI_COMM_SELF's delete callbacks at MPI_Finalize, which keep their order). '#' lines dropped."""
    groups, pending = [], []
    for line in lines:
        if line.startswith("#"):
            continue
        if line.startswith(" "):
            pending.append(line)
            continue
        if " MPI_Finalize " in line:
            self_lines = [x for x in pending if x.startswith("  cb delete self ")]
            rest = sorted(x for x in pending if not x.startswith("  cb delete self "))
            nested = tuple(self_lines + rest)
        else:
            nested = tuple(sorted(pending))
        groups.append((line, nested))
        pending = []
    if pending:
        groups.append(("<trace ends inside a call>", tuple(sorted(pending))))
    return groups


def op_call(line):
    """'MPI_Type_set_attr' of '12 MPI_Type_set_attr t3 k1 v=5 rc=ok' (or of a skip line)."""
    parts = line.split()
    if len(parts) >= 2 and parts[1] == "skip":
        return parts[2] if len(parts) > 2 else "skip"
    return parts[1] if len(parts) > 1 else line


def diff_class(actual, expected):
    """None if the canonical traces agree, else (class text, index of the first differing group, detail)."""
    for i in range(max(len(actual), len(expected))):
        a = actual[i] if i < len(actual) else None
        e = expected[i] if i < len(expected) else None
        if a == e:
            continue
        if a is None:
            return (f"{op_call(e[0])}: trace ends before it", i, {"expected": e, "actual": None})
        if e is None:
            return (f"{op_call(a[0])}: extra call in trace", i, {"expected": None, "actual": a})
        call = op_call(e[0])
        if a[0].startswith("<trace ends"):
            return (f"{call}: run ends inside the call", i, {"expected": e, "actual": a})
        ea, ee = collections.Counter(a[1]), collections.Counter(e[1])
        extra, missing = list((ea - ee).elements()), list((ee - ea).elements())
        kinds = []

        def what(lines):
            out = set()
            for x in lines:
                w = x.split()
                if w[0] == "cb":
                    out.add(f"{w[1]} callback" + (" on an internal object" if w[2] == "internal" else ""))
                else:
                    out.add("nested call")
            return sorted(out)
        if missing and not extra:
            kinds.append("missing " + ", ".join(what(missing)))
        elif extra and not missing:
            kinds.append("extra " + ", ".join(what(extra)))
        elif extra or missing:
            if sorted(a[1]) == sorted(e[1]):
                kinds.append("callback order differs")
            else:
                kinds.append("callbacks differ (" + ", ".join(sorted(set(what(extra)) | set(what(missing)))) + ")")
        if a[0] != e[0]:
            fa = dict(x.split("=", 1) for x in a[0].split() if "=" in x)
            fe = dict(x.split("=", 1) for x in e[0].split() if "=" in x)
            fields = sorted(k for k in set(fa) | set(fe) if fa.get(k) != fe.get(k))
            if a[0].split()[1] == "skip" or e[0].split()[1] == "skip":
                fields = ["skipped"]
            kinds.append(f"result differs ({', '.join(fields) or 'call'})")
        return (f"{call}: " + "; ".join(kinds), i, {"expected": e, "actual": a})
    return None


# ---- reports ----

def findings_of(out):
    path = os.path.join(out, "report.json")
    if not os.path.exists(path):
        return None, []
    with open(path) as f:
        data = json.load(f)
    stacks = {s["id"]: s.get("frames", []) for s in data.get("stacks", [])}
    result = []
    for fd in data.get("findings", []):
        frames = [fd.get("site") or {}] + stacks.get(fd.get("stack"), [])
        result.append({"rule": fd["rule"], "severity": fd["severity"], "message": fd.get("message", ""),
                       "lines": [f.get("line") for f in frames if str(f.get("file", "")).endswith("prog.c")]})
    return data, result


def norm(msg):
    """A finding's message without what varies between programs: numbers, handles, which communicator."""
    msg = re.sub(r"\bMPI_COMM_(WORLD|SELF)\b|\bcomm\b(?: N)?", "COMM", re.sub(r"0x[0-9a-fA-F]+|\d+", "N", msg))
    return msg[:160]


# ---- one program ----

class Run:
    """A program's runs: prog.c compiled once, then each mode."""

    def __init__(self, build, prog, np, workdir, modes=MODES, inject=None):
        self.b, self.p, self.np, self.dir, self.inject = build, prog, np, workdir, inject
        os.makedirs(workdir, exist_ok=True)
        self.src = os.path.join(workdir, "prog.c")
        text, self.at = P.c_source(prog)
        with open(self.src, "w") as f:
            f.write(text)
        with open(os.path.join(workdir, "prog.json"), "w") as f:
            json.dump(prog.to_json(), f)
        self.exe = os.path.join(workdir, "prog")
        build.compile(self.src, self.exe)
        self.results = {}
        for mode in modes:
            self.results[mode] = self.run(mode)

    def run(self, mode):
        trace = os.path.join(self.dir, f"trace.{mode}")
        out = os.path.join(self.dir, f"out.{mode}")
        for r in range(self.np):
            if os.path.exists(f"{trace}.{r}"):
                os.unlink(f"{trace}.{r}")
        shutil.rmtree(out, ignore_errors=True)
        cmd = self.b.command(self.exe, trace, self.np, mode, out)
        # A temporary directory of the run's own: two Open MPI singletons starting at once race to
        # make their shared session directory (/tmp/ompi.HOST.UID: "mkdir ... File exists", then
        # "Local abort before MPI_INIT completed"), natively too, and the fuzzer runs two at a time.
        # (Short, for the launchers' Unix sockets in it.)
        tmp = tempfile.mkdtemp(prefix="attrcheck-fuzz-")
        env = dict(self.b.env, TMPDIR=tmp)
        t0 = time.time()
        for attempt in range(30):
            try:
                p = subprocess.run(cmd, env=env, cwd=self.dir, capture_output=True, text=True,
                                   timeout=TIMEOUT)
                status, stderr = p.returncode, p.stderr
                break
            except subprocess.TimeoutExpired:
                status, stderr = "timeout", ""
                break
            except OSError as e:  # the launcher being rebuilt (replaced) under us: wait for it
                status, stderr = "cannot start", str(e)
                time.sleep(2)
        shutil.rmtree(tmp, ignore_errors=True)
        res = {"cmd": cmd, "status": status, "stderr": stderr[-3000:], "seconds": time.time() - t0,
               "traces": read_traces(trace, self.np)}
        if mode != "native":
            res["report"], res["findings"] = findings_of(out)
            if self.inject == "finding" and mode == "shadow":
                res["findings"].append({"rule": "attr.leak", "severity": "warning", "lines": [],
                                        "message": "injected finding (fuzz.py --inject finding)"})
        return res

    def op_of(self, finding):
        for line in finding["lines"]:
            if line in self.at:
                return self.at[line]
        return None


def models(prog, profile, np, inject=None):
    """{run: {rank: canonical trace}} the model predicts for native/shadow (the library's) and emulate."""
    ops = prog.ops()
    out = {}
    for run in ("native", "emulate"):
        b = M.Behaviour.for_run(profile, run)
        out[run] = {}
        for r in range(np):
            m = M.Model(prog, b, rank=r, size=np)
            if inject == "model" and run == "emulate":
                m.copy = broken_copy(m)
            out[run][r] = canon(m.run(ops))
    return out


def broken_copy(m):
    """--inject model: a standard model whose transforming copy callbacks add 8 instead of 7."""
    orig = m.copy

    def copy(k, obj, value):
        if k.spec["copy"] == M.C_TRANSFORM:
            k.spec = dict(k.spec, copy=M.C_COPY)
            try:
                f, o, rc = orig(k, obj, value)
            finally:
                k.spec = dict(k.spec, copy=M.C_TRANSFORM)
            return f, o + 8, rc
        return orig(k, obj, value)
    return copy


def known_for(cls, library):
    for k in KNOWN:
        if k["library"] not in (None, library):
            continue
        if re.search(k["match"], cls):
            return k
    return None


def classify(run):
    """[{"class", "owner": attrcheck|library, "detail"}] of a finished Run (empty: all agree)."""
    p, res, np = run.p, run.results, run.np
    out = []

    def add(cls, owner, detail=None):
        out.append({"class": cls, "owner": owner, "detail": detail or {}})

    seeded = p.kind != "legal"
    for mode, r in res.items():
        if r["status"] != 0:
            add(f"exit {mode}: {r['status']}", "library" if mode == "native" else "attrcheck",
                {"stderr": r["stderr"][-1500:]})
        if len(r["traces"]) < np and not seeded:
            add(f"trace {mode}: ranks {sorted(set(range(np)) - set(r['traces']))} wrote none", "attrcheck" if mode != "native" else "library")
    if seeded:
        return out + check_seeded(run)
    version = next((l[len("# library "):] for t in res.get("native", res.get("shadow", {})).get("traces", {}).values()
                    for l in t if l.startswith("# library ")), "")
    profile = series_of(version, run.b)
    want = models(p, profile, np, run.inject)
    native_div = {}
    for rank in range(np):
        nat = canon(res["native"]["traces"].get(rank, [])) if "native" in res else None
        if nat is not None:
            d = diff_class(nat, want["native"][rank])
            if d:
                native_div[rank] = d
                add(f"native: {d[0]}", "library", {"rank": rank, **d[2]})
        if "shadow" in res:
            sh = canon(res["shadow"]["traces"].get(rank, []))
            d = diff_class(sh, want["native"][rank])
            if d:
                if nat is not None and sh == nat:
                    pass  # the library's own divergence, forwarded faithfully
                elif rank in native_div and native_div[rank][0] == d[0]:
                    pass  # the same divergence natively, met at another call (the library's order differs)
                else:
                    dn = diff_class(sh, nat) if nat is not None else d
                    add(f"shadow: {(dn or d)[0]}", "attrcheck", {"rank": rank, "vs": "native" if dn else "model",
                                                                **(dn or d)[2]})
        if "emulate" in res:
            em = canon(res["emulate"]["traces"].get(rank, []))
            d = diff_class(em, want["emulate"][rank])
            if d:
                owner = "attrcheck"
                add(f"emulate: {d[0]}", owner, {"rank": rank, **d[2]})
    for mode in ("shadow", "emulate"):
        if mode not in res:
            continue
        # the deprecated calls the program makes in this mode's model (not those its guards skip:
        # which those are depends on the callbacks run), each drawing deprecated.call
        deprecated = {op_call(g[0]) for g in want["native" if mode == "shadow" else "emulate"][0]
                      if g[0].split()[1:2] != ["skip"]} & DEPRECATED
        r = res[mode]
        if r["report"] is None:
            add(f"report {mode}: no report.json", "attrcheck")
            continue
        seen_depr = set()
        for f in r["findings"]:
            if f["severity"] == "info":
                continue
            if f["rule"] == "deprecated.call":
                call = f["message"].split(" ")[0]
                if call in deprecated:
                    seen_depr.add(call)
                    continue
            i = run.op_of(f)
            call = op_call(canon_line(run, i)) if i is not None else "?"
            cls = f"finding {mode}: {f['rule']} at {call}: {norm(f['message'])}"
            owner = "attrcheck"
            if f["rule"] == "impl.divergence" and mode == "shadow" and native_div:
                # the library departed from the model here natively too: attrcheck is right to say
                # so, unless the release's profile lists that divergence (then it is a note)
                here = [d for rk, d in native_div.items() if i is None or (d[1] is not None and group_op(res, rk, d[1]) == i)]
                profiled = [d for d in here if (known_for(f"native: {d[0]}", run.b.cfg.library) or {}).get("profile")
                            in profile.get("divergences", {})]
                if here and not profiled:
                    owner = "library"
            add(cls, owner, {"message": f["message"], "op": i})
        for call in sorted(deprecated - seen_depr):
            add(f"missed {mode}: deprecated.call for {call}", "attrcheck")
    return out


def canon_line(run, i):
    for t in run.results.get("native", run.results.get("shadow", {})).get("traces", {}).values():
        for line in t:
            if line.split(" ", 1)[0] == str(i):
                return line
    return f"{i} op{i}"


def group_op(res, rank, gi):
    t = res.get("native", {}).get("traces", {}).get(rank, [])
    g = canon(t)
    if gi < len(g):
        try:
            return int(g[gi][0].split()[0])
        except ValueError:
            return None
    return None


def check_seeded(run):
    rule = run.p.kind
    out = []
    for mode in ("shadow", "emulate"):
        r = run.results.get(mode)
        if r is None:
            continue
        if r["report"] is None:
            out.append({"class": f"report {mode}: no report.json", "owner": "attrcheck", "detail": {}})
            continue
        rules = collections.Counter(f["rule"] for f in r["findings"] if f["severity"] != "info")
        if rule not in rules:
            out.append({"class": f"missed {mode}: {rule}", "owner": "attrcheck",
                        "detail": {"findings": [f"{f['rule']}: {f['message']}" for f in r["findings"]]}})
        for other in rules:
            if other != rule:
                msgs = [f for f in r["findings"] if f["rule"] == other]
                i = run.op_of(msgs[0])
                call = op_call(canon_line(run, i)) if i is not None else "?"
                out.append({"class": f"finding {mode}: {other} at {call}: {norm(msgs[0]['message'])}",
                            "owner": "attrcheck", "detail": {"seeded": rule, "message": msgs[0]["message"]}})
    return out


def modes_for(cls):
    """The runs a class needs to show itself (the shrinker runs only these)."""
    if cls.startswith("native") or cls.startswith("exit native"):
        return ("native",)
    if cls.startswith("emulate") or " emulate" in cls.split(":")[0]:
        return ("native", "emulate") if cls.startswith("finding emulate: impl") else ("emulate",)
    return ("native", "shadow")


# ---- shrinking ----

def shrink(build, prog, np, cls, workdir, budget=120, modes=None):
    """A smaller body (delta debugging) whose program still shows `cls`; returns (program, tests run)."""
    modes = modes or modes_for(cls)
    tests = [0]

    def fails(body, keyvals=None):
        if tests[0] >= budget:
            return False
        tests[0] += 1
        cand = prog.copy(body)
        if keyvals is not None:
            cand.keyvals = keyvals
        d = os.path.join(workdir, f"try{tests[0]}")
        try:
            r = Run(build, cand, np, d, modes=modes)
            ok = any(c["class"] == cls for c in classify(r))
        except RuntimeError:
            ok = False
        shutil.rmtree(d, ignore_errors=True)
        return ok

    body = list(prog.body)
    n = 2
    while len(body) >= 2 and tests[0] < budget:
        chunk = max(1, len(body) // n)
        reduced = False
        for start in range(0, len(body), chunk):
            cand = body[:start] + body[start + chunk:]
            if fails(cand):
                body, n, reduced = cand, max(n - 1, 2), True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(body), n * 2)
    small = prog.copy(body)
    # simpler keyvals: no action, then no user copy callback, where the failure stays
    kvs = [dict(k) for k in small.keyvals]
    for i, k in enumerate(kvs):
        for field, plain in (("act", M.A_NONE), ("copy", M.C_NULL), ("del", M.D_NULL)):
            if k[field] == plain or tests[0] >= budget:
                continue
            trial = [dict(x) for x in kvs]
            trial[i][field] = plain
            if field == "act":
                trial[i]["when"] = 0
            if fails(body, trial):
                kvs = trial
    small = prog.copy(body)
    small.keyvals = kvs
    return small, tests[0]


def describe(cls, run, item):
    """The comment at the top of a minimal program: the failure and what each run said."""
    lines = [f"mismatch class: {cls}", f"owner: {item['owner']}",
             f"library: {run.b.cfg.library} {run.b.cfg.version} ({run.b.profile.get('release')}{', the MPI standard ABI' if run.b.standard_abi else ''}), ranks: {run.np}",
             f"generated from {run.p.kind} seed {run.p.seed}", ""]
    d = item.get("detail") or {}
    if "expected" in d:
        lines.append(f"first differing call (rank {d.get('rank', 0)}, compared with the {d.get('vs', 'model')}):")
        for name, g in (("expected", d["expected"]), ("actual", d["actual"])):
            lines.append(f"  {name}:")
            if g is None:
                lines.append("    (nothing)")
            else:
                for x in g[1]:
                    lines.append("    " + x)
                lines.append("    " + g[0])
    if "message" in d:
        lines.append(f"finding: {d['message']}")
    if "stderr" in d:
        lines.append("stderr: " + d["stderr"].strip()[-600:])
    lines.append("")
    for mode, r in run.results.items():
        lines.append(f"{mode}: exit {r['status']}")
        for f in (r.get("findings") or []):
            lines.append(f"  {f['severity']} {f['rule']}: {f['message']}")
        for rank, t in sorted(r["traces"].items()):
            lines.append(f"  rank {rank} trace (a call's line follows the lines of the callbacks it ran):")
            lines += ["    " + x for x in t if not x.startswith("#")]
    return "\n".join(lines)


# ---- the whole run ----

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--legal", type=int, default=20)
    ap.add_argument("--seeded", type=int, default=10)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--avoid", default="", help="generator switches: " + ", ".join(P.AVOIDABLE))
    ap.add_argument("--strict", action="store_true", help="known attrcheck bugs fail the run too")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--shrink-budget", type=int, default=120, help="program runs per shrink")
    ap.add_argument("--keep", action="store_true", help="keep every program's directory")
    ap.add_argument("--inject", choices=["model", "finding"], help="break the oracle on purpose (self-test)")
    ap.add_argument("--json", help="write the summary here too")
    ap.add_argument("--standard-abi", action="store_true",
                    help="programs built for the MPI standard ABI, run on the build's library's libmpi_abi")
    ap.add_argument("--program", action="append", default=[],
                    help="run this program (a prog.json the tester wrote) at each --ranks instead of generating")
    a = ap.parse_args(argv)

    try:
        build = Build(a.build, standard_abi=a.standard_abi)
    except RuntimeError as e:
        print(f"fuzz: {e}", file=sys.stderr)
        return 2
    if not os.path.exists(build.launcher):
        print(f"fuzz: {build.launcher} missing", file=sys.stderr)
        return 2
    avoid = [x for x in a.avoid.split(",") if x]
    for x in avoid:
        if x not in P.AVOIDABLE:
            print(f"fuzz: unknown --avoid {x} (known: {', '.join(P.AVOIDABLE)})", file=sys.stderr)
            return 2
    ranks = [int(x) for x in a.ranks.split(",") if x]
    out = os.path.abspath(a.out or os.path.join(build.dir, "fuzz-out"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "programs"))
    os.makedirs(os.path.join(out, "minimal"))
    library = build.cfg.library

    jobs = []
    given = {}
    for path in a.program:
        with open(path) as f:
            prog = P.Program.from_json(json.load(f))
        given[path] = prog
        for np in ranks:
            jobs.append((path, prog.seed, np))
    for np in ranks if not a.program else []:
        for i in range(a.legal):
            jobs.append(("legal", a.seed + i, np))
        seedable = [r for r in P.SEEDABLE if not (r == "deprecated.constant" and build.profile.get("null_callbacks_are_null"))
                    and not (r == "deprecated.call" and not build.deprecated_calls)]
        for i in range(a.seeded):
            jobs.append((seedable[i % len(seedable)], a.seed + i, np))

    def one(job):
        kind, seed, np = job
        if kind in given:
            prog = given[kind]
            kind = os.path.splitext(os.path.basename(kind))[0]
        else:
            prog = (P.generate(seed, avoid, deprecated=build.deprecated_calls) if kind == "legal"
                    else P.generate_seeded(seed, kind, avoid, library))
        d = os.path.join(out, "programs", f"{kind}-{seed}-np{np}")
        modes = MODES if prog.kind == "legal" else ("shadow", "emulate")
        try:
            run = Run(build, prog, np, d, modes=modes, inject=a.inject)
        except RuntimeError as e:
            return job, None, [{"class": f"tester: {e}", "owner": "tester", "detail": {}}]
        items = classify(run)
        for it in items:
            k = known_for(it["class"], library)
            it["known"] = k["id"] if k else None
            if k and k["owner"] != it["owner"] and it["owner"] != "tester":
                it["owner"] = k["owner"]
        if not items and not a.keep:
            shutil.rmtree(d, ignore_errors=True)
        return job, run, items

    t0 = time.time()
    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        for job, run, items in ex.map(one, jobs):
            results.append((job, run, items))
            mark = "ok" if not items else ", ".join(sorted({i["class"][:90] for i in items}))
            print(f"fuzz: {job[0]} seed {job[1]} np {job[2]}: {mark}", flush=True)

    classes = collections.OrderedDict()
    for job, run, items in results:
        for it in items:
            c = classes.setdefault(it["class"], {"owner": it["owner"], "known": it.get("known"), "count": 0,
                                                "programs": [], "first": (job, run, it)})
            c["count"] += 1
            c["programs"].append(f"{job[0]}-{job[1]}-np{job[2]}")

    # shrink one program per class
    if not a.no_shrink:
        todo = [(cls, c) for cls, c in classes.items() if c["first"][1] is not None and c["owner"] != "tester"]

        def shrink_one(entry):
            cls, c = entry
            job, run, it = c["first"]
            slug = re.sub(r"[^A-Za-z0-9]+", "-", cls).strip("-")[:80]
            work = os.path.join(out, "shrink", slug)
            small, tests = shrink(build, run.p, run.np, cls, work, budget=a.shrink_budget,
                                  modes=modes_for(cls) if run.p.kind == "legal" else ("shadow", "emulate"))
            final = Run(build, small, run.np, os.path.join(work, "final"),
                        modes=MODES if small.kind == "legal" else ("shadow", "emulate"))
            found = [i for i in classify(final) if i["class"] == cls]
            use_run, use_item = (final, found[0]) if found else (run, it)
            text, _ = P.c_source(use_run.p, describe(cls, use_run, use_item)
                                 + ("" if found else "\n(shrinking lost the failure: this is the original program)"))
            path = os.path.join(out, "minimal", slug + ".c")
            with open(path, "w") as f:
                f.write(text)
            shutil.rmtree(work, ignore_errors=True)
            return cls, path, len(use_run.p.ops()), tests
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
            for cls, path, nops, tests in ex.map(shrink_one, todo):
                classes[cls]["minimal"] = path
                classes[cls]["minimal_ops"] = nops
                classes[cls]["shrink_runs"] = tests

    # summary
    per = collections.Counter((run.p.kind == "legal" if run else j[0] == "legal", j[2]) for j, run, _ in results)
    cover = collections.Counter()
    for job, run, items in results:
        if run:
            mode = "native" if "native" in run.results else "shadow"
            for t in run.results[mode]["traces"].values():
                for line in t:
                    w = line.split()
                    if not w or w[0] == "#":
                        continue
                    if w[0] == "cb":
                        cover[f"{w[1]} callbacks" + (" (internal object)" if w[2] == "internal" else "")] += 1
                        if line.startswith("    "):
                            cover["nested callbacks"] += 1
                    elif line.startswith(" "):
                        cover["skipped actions" if w[0] == "skip" else "callback actions"] += 1
                    elif len(w) > 1 and w[1] == "skip":
                        cover["skipped calls"] += 1
                    else:
                        cover["calls"] += 1
    failing = [c for c, v in classes.items() if v["owner"] in ("attrcheck", "tester") and (a.strict or not v["known"])]
    print()
    print(f"fuzz: {library} {build.cfg.version} ({build.profile.get('release')}{', the MPI standard ABI' if build.standard_abi else ''}), {len(results)} programs in "
          f"{time.time() - t0:.0f} s: " + ", ".join(f"{n} {'legal' if legal else 'seeded'} at {np} rank(s)"
                                                     for (legal, np), n in sorted(per.items())))
    info = collections.Counter()
    for job, run, items in results:
        if run:
            for mode in ("shadow", "emulate"):
                for f in (run.results.get(mode, {}).get("findings") or []):
                    if f["severity"] == "info":
                        info[f"{mode}: {f['rule']}: {norm(f['message'])[:100]}"] += 1
    groups = [("attrcheck failures (new)", lambda v: v["owner"] in ("attrcheck", "tester") and not v["known"]),
              ("attrcheck failures (known bugs)", lambda v: v["owner"] == "attrcheck" and v["known"]),
              ("library divergences", lambda v: v["owner"] == "library")]
    missed = sum(v["count"] for c, v in classes.items() if c.startswith("missed"))
    for title, pred in groups:
        sel = [(c, v) for c, v in classes.items() if pred(v)]
        print(f"{title}: {len(sel)} class(es), {sum(v['count'] for _, v in sel)} program(s)")
        for c, v in sel:
            print(f"  [{v['count']}] {c}" + (f"  (known: {v['known']})" if v["known"] else ""))
            print(f"       e.g. {v['programs'][0]}" + (f"; minimal ({v['minimal_ops']} ops): {v['minimal']}"
                                                        if v.get("minimal") else ""))
    print(f"missed errors (seeded rule not reported): {missed}")
    print("exercised (all ranks): " + ", ".join(f"{n} {k}" for k, n in sorted(cover.items())))
    if info:
        print("info notes seen:")
        for k, n in info.most_common():
            print(f"  [{n}] {k}")
    summary = {"library": library, "version": build.cfg.version, "programs": len(results),
               "classes": {c: {k: v[k] for k in v if k != "first"} for c, v in classes.items()},
               "missed": missed, "failing": failing, "info": dict(info), "exercised": dict(cover)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"fuzz: {'FAIL' if failing else 'ok'}: {len(failing)} attrcheck failure class(es); details in {out}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
