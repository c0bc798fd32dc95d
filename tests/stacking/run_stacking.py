#!/usr/bin/env python3
"""attrcheck stacked with another PMPI tool: one case per tool, load order and way of launching;
and attrcheck loaded into a program of another MPI library than the one it is built for.

The program (stack_app.c) runs on 2 ranks with attrcheck and one of the tools: tool_direct.c
(mpiP-like: wraps the keyval, attribute and object calls, calls PMPI_ itself), tool_next.c
(Darshan-like: wraps MPI_Init / MPI_Finalize only, forwards with dlsym(RTLD_NEXT)) or valgrind's
MPI wrapper (libmpiwrap, a no-op outside valgrind), in either order, launched as
  launcher:  [LD_PRELOAD=TOOL] attrcheck [--preload-first TOOL] -- mpiexec -n 2 ./app
  by-hand:   mpiexec -n 2 env LD_PRELOAD=A:B ATTRCHECK_OUTPUT=DIR ./app
Each case also runs what it is compared with: the program natively, the tool alone and attrcheck
alone (same launch form). The baseline cases check those runs themselves.

The other-mpi cases run other_app.c, built with the other library's mpicc (MPICH's with the Open
MPI build, Open MPI's with the MPICH build) or for the MPI standard ABI (libmpi_abi.so.1) on each
library's ABI library, with that library's own mpiexec, by hand (shadow mode) and under the
launcher (emulate mode). attrcheck's handles and constants are not that library's: it must pass
every call on untouched (stdout and exit as natively), report tool.other-mpi only, say on stderr
in one line (the first rank's) what to use instead, and never crash or abort. MPICH's ABI library
is chosen with LD_LIBRARY_PATH (a directory holding libmpi_abi.so.1, a link to it: both libraries'
have that SONAME), Open MPI's the same way, whichever one ldconfig picked.

usage: run_stacking.py --list
       run_stacking.py --build DIR --case NAME [--workdir DIR]
Exit status: 0 passed, 1 failed, 77 skipped (ctest's SKIP_RETURN_CODE).
"""
import argparse
import difflib
import glob
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
import mpi_config  # noqa: E402
import report_files  # noqa: E402

NP = 2
SKIP = 77

# --- expectations --------------------------------------------------------------------------------
# What comes of each stacking. outcome "checked": attrcheck sees every call (findings, intercepted
# counts and per-rank "finalized" status as attrcheck alone); "bypassed": a tool before attrcheck
# kept the calls from it (tool.bypassed); "not-loaded": no rank loaded attrcheck. In every case the
# program's stdout is as native and the tool's own output files are as the tool alone writes them
# (a tool after attrcheck: less WITHHELD, below).
# exit: the launch form's exit status, a number or a status the launcher's --help documents.
# stderr: words the launcher's stderr must contain (launcher form only).
OUTCOMES = {
    "checked":    {"exit": {"launcher": 1, "by-hand": 0}, "stderr": []},
    "bypassed":   {"exit": {"launcher": "unchecked", "by-hand": 0}, "stderr": ["tool.bypassed"]},
    "not-loaded": {"exit": {"launcher": "not-loaded"}, "stderr": ["LD_PRELOAD"]},
}
# (tool, order) -> outcome, for both launch forms.
STACKS = {
    ("direct", "attrcheck-first"): "checked",
    ("direct", "tool-first"): "bypassed",
    ("next", "attrcheck-first"): "checked",
    ("next", "tool-first"): "checked",
    ("valgrind", "attrcheck-first"): "checked",
    ("valgrind", "tool-first"): "checked",
}
# attrcheck -- mpiexec -x LD_PRELOAD=TOOL (Open MPI) / -genv LD_PRELOAD TOOL (MPICH): the command's
# LD_PRELOAD replaces attrcheck's in the ranks.
REPLACED = ("direct", "not-loaded")
# The program's stdout (rank 0's line: its delete callback ran once), and the rules attrcheck must
# report on it.
APP_STDOUT = "callback ran 1\n"
APP_RULES = {"keyval.double-free", "keyval.leak"}
# What each tool writes per rank when it runs alone (None: it writes nothing).
TOOL_ALONE = {
    "direct": ("direct.{rank}.txt", "MPI_Init 1\nMPI_Init_thread 0\nMPI_Finalize 1\nMPI_Comm_dup 1\n"
               "MPI_Comm_free 1\nMPI_Comm_create_keyval 2\nMPI_Comm_set_attr 1\nMPI_Comm_free_keyval 2\n"
               "MPI_Sendrecv 1\ninitialised: yes\n"),
    "next": ("next.{rank}.txt", "MPI_Init 1\nMPI_Finalize 1\n"),
    "valgrind": None,
}
# Calls a tool after attrcheck does not see, although the tool alone does: attrcheck reports an
# erroneous call and never passes it on (--on-error report), here the program's second
# MPI_Comm_free_keyval. The expected "NAME COUNT" lines of a tool after attrcheck are the tool
# alone's minus these.
WITHHELD = {"MPI_Comm_free_keyval": 1}
FORMS = ("launcher", "by-hand")
# The program making no keyval, attribute or object call (stack_app.c: STACK_APP_PLAIN), behind the
# Darshan-like tool: attrcheck never sees MPI start or end, and the run is clean all the same.
PLAIN = "next.tool-first.launcher.plain"
# The programs of the other-mpi cases (other_app.c): built with the other library's mpicc, or for
# the standard ABI and run on that library's ABI library.
OTHER_PROGRAMS = ("other-native", "abi-on-openmpi", "abi-on-mpich")
LIBRARIES = ("openmpi", "mpich")
# The standard ABI's mpi.h, as each library installs it (they agree: the ABI is the standard's).
ABI_HEADERS = ("/usr/lib/{arch}/openmpi/include/standard_abi", "/usr/lib/{arch}/mpi_abi_mpich/include")


def case_names():
    names = ["native"] + [f"{tool}.alone" for tool in TOOL_ALONE] + [f"attrcheck.alone.{f}" for f in FORMS]
    names += [f"{tool}.{order}.{form}" for (tool, order) in STACKS for form in FORMS]
    names += [f"other-mpi.{program}.{form}" for program in OTHER_PROGRAMS for form in FORMS]
    return names + ["replaced-preload", PLAIN]


# --- running -------------------------------------------------------------------------------------
class Skip(Exception):
    pass


class Runner:
    def __init__(self, build, workdir):
        self.build = build
        self.workdir = workdir
        self.mpi = mpi_config.load(build)
        self.launcher = os.path.join(build, "bin", "attrcheck")
        self.attrcheck = os.path.join(build, "lib", "libattrcheck.so")
        self.attrcheck_abi = os.path.join(build, "lib", "libattrcheck_abi.so")  # (where the MPI standard ABI is here)
        self.app = os.path.join(build, "tests", "stacking", "stack_app")
        self.problems = []

    def tool_library(self, tool):
        if tool != "valgrind":
            return os.path.join(self.build, "tests", "stacking", f"libstack_tool_{tool}.so")
        found = sorted(glob.glob("/usr/lib/*/valgrind/libmpiwrap-*.so") + glob.glob("/usr/lib*/valgrind/libmpiwrap-*.so"))
        if not found:
            raise Skip("valgrind's MPI wrapper (libmpiwrap, Debian: valgrind-mpi) is not installed")
        if self.mpi.library != "openmpi":
            raise Skip(f"{found[0]} is built against Open MPI (it needs its ompi_mpi_* symbols): "
                       f"it cannot be loaded into a program built against {self.mpi.library}")
        return found[0]

    def run(self, label, tool=None, order=None, form="native", replaced=False, plain=False):
        """Runs the program once; returns (completed process, tool files {name: text}, merged
        report or None). tool: None or a TOOL_ALONE key; order: attrcheck-first / tool-first
        (attrcheck runs unless form is native); form: native, launcher or by-hand."""
        d = os.path.join(self.workdir, label)
        shutil.rmtree(d, ignore_errors=True)
        tool_out, out = os.path.join(d, "tool"), os.path.join(d, "attrcheck-out")
        os.makedirs(tool_out)
        env = self.mpi.env(STACK_TOOL_OUT=tool_out, **({"STACK_APP_PLAIN": "1"} if plain else {}))
        env.pop("LD_PRELOAD", None)
        lib = self.tool_library(tool) if tool else None
        if tool == "valgrind" and form == "launcher" and order == "attrcheck-first":
            # (LD_PRELOAD=libmpiwrap in the launcher's environment is loaded into every process the
            # command starts, the launcher and mpiexec among them, and it cannot be loaded outside an
            # Open MPI program: that command fails without attrcheck too.)
            raise Skip("valgrind's MPI wrapper cannot be in the environment of a launcher (mpiexec fails to load "
                       "it natively as well): after attrcheck it is given to the ranks by hand")
        if form == "native":
            command = self.mpi.mpiexec(NP, *(["env", f"LD_PRELOAD={lib}"] if lib else []), self.app)
        elif form == "by-hand":
            preload = [self.attrcheck] + ([lib] if lib else [])
            if order == "tool-first":
                preload.reverse()
            command = self.mpi.mpiexec(NP, "env", "LD_PRELOAD=" + ":".join(preload), f"ATTRCHECK_OUTPUT={out}", self.app)
        else:
            command = [self.launcher, "--output", out]
            if replaced:
                ranks = (["-x", f"LD_PRELOAD={lib}"] if self.mpi.library == "openmpi" else ["-genv", "LD_PRELOAD", lib])
                mpiexec = [self.mpi.launcher, *ranks, self.mpi.numproc_flag, str(NP), self.app]
            else:
                mpiexec = self.mpi.mpiexec(NP, self.app)
                if lib and order == "tool-first":
                    command += ["--preload-first", lib]
                elif lib:
                    env["LD_PRELOAD"] = lib  # the launcher puts it after attrcheck
            command += ["--", *mpiexec]
        p = self.logged(d, command, env)
        files = {}
        for name in sorted(os.listdir(tool_out)):
            with open(os.path.join(tool_out, name)) as f:
                files[name] = f.read()
        return p, files, None if form == "native" else self.report(out, d)

    def logged(self, d, command, env):
        """Runs `command`, keeping what it did in d/command.txt."""
        p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
        with open(os.path.join(d, "command.txt"), "w") as f:
            f.write(f"{' '.join(command)}\nLD_PRELOAD={env.get('LD_PRELOAD', '')}\n"
                    f"LD_LIBRARY_PATH={env.get('LD_LIBRARY_PATH', '')}\nexit {p.returncode}\n"
                    f"--- stdout\n{p.stdout}--- stderr\n{p.stderr}")
        return p

    def report(self, out, d):
        """The run's merged report: report.json, or the per-rank reports merged with
        attrcheck-report (a run by hand in which ranks wrote their own); None if there is none."""
        path = os.path.join(out, "report.json")
        if not os.path.exists(path):
            if not report_files.rank_files(out):
                return None
            path = os.path.join(d, "merged.json")
            subprocess.run([os.path.join(self.build, "bin", "attrcheck-report"), "merge", out, "-o", path],
                           capture_output=True, text=True, timeout=120, check=True)
        with open(path) as f:
            return json.load(f)

    # --- checks ----------------------------------------------------------------------------------
    def expect(self, ok, what, p=None):
        if not ok:
            detail = f"\n  command exited {p.returncode}; stderr:\n{p.stderr[-3000:]}" if p is not None else ""
            self.problems.append(what + detail)

    def documented_exit(self, status):
        """The exit status the launcher's --help gives for `status` (unchecked, not-loaded), or None."""
        text = " ".join(subprocess.run([self.launcher, "--help"], capture_output=True, text=True).stdout.split())
        words = {"unchecked": r"(\d+) if the run was not checked", "not-loaded": r"(\d+) if no rank wrote a report"}
        m = re.search(words[status], text)
        return int(m.group(1)) if m else None

    def check_exit(self, p, expected):
        if isinstance(expected, int):
            self.expect(p.returncode == expected, f"exit status {p.returncode}, expected {expected}", p)
            return
        number = self.documented_exit(expected)
        if number is not None:
            self.expect(p.returncode == number, f"exit status {p.returncode}, expected {number} ({expected}, as --help says)", p)
        else:  # --help gives no number: any failure but the findings' 1
            self.expect(p.returncode not in (0, 1), f"exit status {p.returncode}, expected a {expected} status (not 0 or 1)", p)

    def check_tool_files(self, tool, files, expected, what):
        """The tool's files are `expected` ({name: text}); a difference is shown as a diff."""
        if files == expected:
            return
        diff = []
        for name in sorted(set(files) | set(expected)):
            diff += difflib.unified_diff(expected.get(name, "").splitlines(), files.get(name, "").splitlines(),
                                         f"expected/{name}", f"written/{name}", lineterm="")
        self.problems.append(f"{tool}'s own output {what} differs:\n  " + "\n  ".join(diff))

    def check_checked(self, report, alone, what):
        """`report` shows attrcheck at work as in `alone` (both merged reports)."""
        if report is None:
            self.problems.append(f"{what}: attrcheck wrote no report")
            return
        self.expect(any(any(c.values()) for c in (report.get("intercepted") or {}).values()),
                    f"{what}: intercepted no call: {report.get('intercepted')}")
        rules = {f["rule"] for f in report.get("findings", [])}
        self.expect(APP_RULES <= rules, f"{what}: rules {sorted(rules)}, expected {sorted(APP_RULES)} among them")
        if alone is not None:
            alone_rules = {f["rule"] for f in alone.get("findings", [])}
            self.expect(rules == alone_rules, f"{what}: rules {sorted(rules)}, attrcheck alone: {sorted(alone_rules)}")
            self.expect(report.get("intercepted") == alone.get("intercepted"),
                        f"{what}: intercepted {report.get('intercepted')}, attrcheck alone: {alone.get('intercepted')}")
        entries = report_files.rank_entries(report)
        ranks = sorted(rank for (_, rank), _ in entries)
        statuses = sorted({e.get("status") for _, e in entries}, key=str)
        self.expect(ranks == list(range(NP)), f"{what}: rank reports {ranks}, expected 0 to {NP - 1}")
        self.expect(statuses == ["finalized"], f"{what}: rank statuses {statuses}, expected finalized")


def alone_files(tool):
    if TOOL_ALONE[tool] is None:
        return {}
    name, text = TOOL_ALONE[tool]
    return {name.format(rank=r): text for r in range(NP)}


def without_withheld(files):
    """A tool's files (as it writes them alone) less the calls attrcheck withholds (WITHHELD)."""
    def line(text):
        name, _, count = text.partition(" ")
        return f"{name} {int(count) - WITHHELD[name]}" if name in WITHHELD and count.isdigit() else text
    return {f: "".join(line(t) + "\n" for t in text.splitlines()) for f, text in files.items()}


def run_plain(r):
    """PLAIN: exit 0, every rank "finalized", no finding."""
    p, _, report = r.run("stacked", tool="next", order="tool-first", form="launcher", plain=True)
    r.check_exit(p, 0)
    r.expect(p.stdout == "callback ran 0\n", f"stdout {p.stdout!r}")
    if report is None:
        r.problems.append("attrcheck wrote no report")
        return
    findings = [f["rule"] for f in report.get("findings", [])]
    r.expect(not findings, f"findings {findings}, expected none")
    entries = report_files.rank_entries(report)
    r.expect(sorted(rank for (_, rank), _ in entries) == list(range(NP)), f"rank reports {entries}")
    r.expect({e.get("status") for _, e in entries} == {"finalized"}, f"rank statuses {entries}")


def compile_program(command, what):
    p = subprocess.run(command, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"compiling {what} failed: {' '.join(command)}\n{p.stdout}{p.stderr}")


def other_program(r, program, d):
    """(the command that runs other_app.c, built as `program` says, on NP ranks with its library's
    mpiexec; the environment it needs)."""
    source, app = os.path.join(HERE, "other_app.c"), os.path.join(d, "other_app")
    if program == "other-native":
        other = next(lib for lib in LIBRARIES if lib != r.mpi.library)
        cc, mpiexec = shutil.which(f"mpicc.{other}"), shutil.which(f"mpiexec.{other}")
        if not cc or not mpiexec:
            raise Skip(f"{other} is not installed (mpicc.{other}, mpiexec.{other})")
        compile_program([cc, source, "-o", app], f"the program with mpicc.{other}")
        return [mpiexec, "-n", str(NP), app], {}
    library = program.rsplit("-", 1)[1]
    arch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    headers = [h.format(arch=arch) for h in ABI_HEADERS if os.path.exists(os.path.join(h.format(arch=arch), "mpi.h"))]
    found = sorted(glob.glob(f"/usr/lib/{arch}/libmpi_abi_{library}.so.1*"))
    mpiexec = shutil.which(f"mpiexec.{library}")
    if not headers or not found or not mpiexec:
        raise Skip(f"{library} has no MPI standard ABI library here (libmpi_abi_{library}.so.1, the standard ABI's "
                   f"mpi.h, mpiexec.{library}: Debian ships them from MPICH 5.0 and Open MPI 6.0)")
    # Compiled against the ABI's mpi.h and linked by SONAME (libmpi_abi.so.1), whichever library's
    # file it is: the same program for both.
    compile_program(["gcc", f"-I{headers[0]}", source, "-o", app, found[0]], "the program for the standard ABI")
    chooser = os.path.join(d, f"libmpi_abi-{library}")
    os.makedirs(chooser)
    os.symlink(found[0], os.path.join(chooser, "libmpi_abi.so.1"))
    return [mpiexec, "-n", str(NP), app], {"LD_LIBRARY_PATH": chooser}


def run_other_mpi(r, program, form):
    """An other-mpi case: as natively, but for tool.other-mpi, its one line and the exit status."""
    d = os.path.join(r.workdir, "program")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    command, extra = other_program(r, program, d)
    env = r.mpi.env(**extra)
    env.pop("LD_PRELOAD", None)
    native = r.logged(d, command, env)
    if native.returncode != 0 or "other_app:" not in native.stdout:
        raise RuntimeError(f"the program fails natively (exit {native.returncode}):\n{native.stdout}{native.stderr}")
    d = os.path.join(r.workdir, form)
    shutil.rmtree(d, ignore_errors=True)
    out = os.path.join(d, "attrcheck-out")
    os.makedirs(d)
    if form == "by-hand":
        p = r.logged(d, [*command[:3], "env", f"LD_PRELOAD={r.attrcheck}", f"ATTRCHECK_OUTPUT={out}", *command[3:]], env)
        r.check_exit(p, 0)
    elif program != "other-native" and os.path.exists(r.attrcheck_abi):
        # The launcher picks the standard ABI build for a program that needs libmpi_abi.so.1: the
        # correct program is checked, in both modes, on this ABI library, and draws no finding.
        for mode in ("shadow", "emulate"):
            shutil.rmtree(out, ignore_errors=True)
            p = r.logged(d, [r.launcher, "--mode", mode, "--output", out, "--", *command], env)
            r.check_exit(p, 0)
            r.expect(p.stdout == native.stdout, f"{mode}: stdout {p.stdout!r}, natively {native.stdout!r}", p)
            r.expect("attrcheck: the program runs on " not in p.stderr,
                     f"{mode}: the standard ABI build says the program runs on another library", p)
            report = r.report(out, d)
            findings = [f["rule"] for f in (report or {}).get("findings", [])]
            r.expect(report is not None and not findings, f"{mode}: findings {findings} on a correct program", p)
            r.expect(report is not None and "tool.other-mpi" not in json.dumps(report),
                     f"{mode}: the report says the run was not checked", p)
        return
    else:
        p = r.logged(d, [r.launcher, "--mode", "emulate", "--output", out, "--", *command], env)
        r.check_exit(p, "unchecked")
        r.expect("tool.other-mpi" in p.stderr, "the launcher's summary does not name tool.other-mpi", p)
    r.expect(p.stdout == native.stdout, f"stdout {p.stdout!r}, natively {native.stdout!r}", p)
    said = [line for line in p.stderr.splitlines() if line.startswith("attrcheck: the program runs on ")]
    r.expect(len(said) == 1, f"{len(said)} lines on stderr say which library the program runs on, expected 1 "
             "(the first rank's)", p)
    if said:
        r.expect("this attrcheck is built for" in said[0] and
                 re.search(r"\bUse attrcheck built for|Use attrcheck's standard ABI build, libattrcheck_abi\.so",
                           said[0]),
                 f"the line does not say what attrcheck is built for and what to use: {said[0]}", p)
    for bad in ("Segmentation fault", "MPI_ABORT", "MPI_ERR_", "signal 11", "core dumped"):
        r.expect(bad not in p.stderr, f"stderr has {bad!r}", p)
    report = r.report(out, d)
    rules = sorted({f["rule"] for f in (report or {}).get("findings", [])})
    r.expect(rules == ["tool.other-mpi"], f"the report's rules are {rules}, expected only tool.other-mpi", p)


def run_case(r, name):
    if name == PLAIN:
        return run_plain(r)
    if name.startswith("other-mpi."):
        return run_other_mpi(r, *name.split(".")[1:])
    native, _, _ = r.run("native")
    r.expect(native.returncode == 0, f"native run exited {native.returncode}", native)
    r.expect(native.stdout == APP_STDOUT, f"native stdout {native.stdout!r}, expected {APP_STDOUT!r}")
    if name == "native":
        return
    parts = name.split(".")
    if parts[1:] == ["alone"]:  # the tool alone: its own files as TOOL_ALONE says
        p, files, _ = r.run("tool-alone", tool=parts[0])
        r.expect(p.returncode == 0, f"{parts[0]} alone exited {p.returncode}", p)
        r.expect(p.stdout == native.stdout, f"{parts[0]} alone: stdout {p.stdout!r}, natively {native.stdout!r}")
        r.check_tool_files(parts[0], files, alone_files(parts[0]), "alone")
        return
    if parts[0] == "attrcheck":  # attrcheck alone
        form = parts[2]
        p, _, report = r.run("attrcheck-alone", order="attrcheck-first", form=form)
        r.check_exit(p, OUTCOMES["checked"]["exit"][form])
        r.expect(p.stdout == native.stdout, f"attrcheck alone: stdout {p.stdout!r}, natively {native.stdout!r}")
        r.check_checked(report, None, "attrcheck alone")
        return
    if name == "replaced-preload":
        tool, outcome = REPLACED
        order, form = None, "launcher"
    else:
        tool, order, form = parts
        outcome = STACKS[(tool, order)]
    tool_alone, alone_tool_files, _ = r.run("tool-alone", tool=tool)
    r.expect(tool_alone.returncode == 0, f"{tool} alone exited {tool_alone.returncode}", tool_alone)
    p, files, report = r.run("stacked", tool=tool, order=order, form=form, replaced=name == "replaced-preload")
    expected = OUTCOMES[outcome]
    r.check_exit(p, expected["exit"][form])
    r.expect(p.stdout == native.stdout, f"stdout {p.stdout!r}, natively {native.stdout!r}")
    if order == "attrcheck-first":
        alone_tool_files = without_withheld(alone_tool_files)
    r.check_tool_files(tool, files, alone_tool_files, "stacked, against the tool alone (less WITHHELD)")
    if form == "launcher":
        for words in expected["stderr"]:
            r.expect(words in p.stderr, f"the launcher's stderr does not mention {words}", p)
    if outcome == "checked":
        _, _, alone = r.run("attrcheck-alone", order="attrcheck-first", form=form)
        r.check_checked(report, alone, "stacked")
    elif outcome == "bypassed":
        rules = {f["rule"] for f in (report or {}).get("findings", [])}
        r.expect("tool.bypassed" in rules, f"rules {sorted(rules)}, expected tool.bypassed among them")
    else:
        ranks = (report or {}).get("ranks", [])
        r.expect(not ranks, f"rank reports {ranks}, expected none (attrcheck not loaded)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="print the case names, one a line")
    ap.add_argument("--build", help="the build directory")
    ap.add_argument("--case", help="the case to run")
    ap.add_argument("--workdir", help="where the runs' files go (default BUILD/tests/stacking/run/CASE)")
    args = ap.parse_args()
    if args.list:
        print("\n".join(case_names()))
        return 0
    if not args.build or args.case not in case_names():
        ap.error(f"--build DIR and --case NAME (one of: {', '.join(case_names())}) are needed")
    build = os.path.abspath(args.build)
    r = Runner(build, os.path.abspath(args.workdir or os.path.join(build, "tests", "stacking", "run", args.case)))
    try:
        run_case(r, args.case)
    except Skip as e:
        print(f"skipped: {e}")
        return SKIP
    for problem in r.problems:
        print(f"FAIL {args.case}: {problem}")
    print(f"{args.case}: {'failed' if r.problems else 'passed'} (runs in {r.workdir})")
    return 1 if r.problems else 0


if __name__ == "__main__":
    sys.exit(main())
