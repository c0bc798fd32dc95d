#!/usr/bin/env python3
"""attrcheck loaded into a program of another MPI library than the one it is built for: a program
built with the other library's mpicc (MPICH's with the Open MPI build, Open MPI's with the MPICH
build), and one built for the MPI standard ABI (libmpi_abi.so.1), run on each library's ABI
library. attrcheck's handles and constants are not that library's: it must pass every call on
untouched (the program's stdout and exit as natively), report tool.other-mpi once, say on stderr
in one line what to use instead, and never make a finding about the program, crash or abort.
Launched as
  by-hand:   mpiexec -n 2 env LD_PRELOAD=libattrcheck.so ATTRCHECK_OUTPUT=DIR ./app   (shadow mode)
  launcher:  attrcheck --mode emulate -- mpiexec -n 2 ./app
with the program's library's own mpiexec. MPICH's ABI library is chosen with LD_LIBRARY_PATH (a
directory holding libmpi_abi.so.1, a link to it: both libraries' have that SONAME), Open MPI's
the same way, so neither depends on which one ldconfig picked.

usage: run_other_mpi.py --list
       run_other_mpi.py --build DIR --case NAME [--workdir DIR]
Exit status: 0 passed, 1 failed, 77 skipped (ctest's SKIP_RETURN_CODE).
"""
import argparse
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
SOURCE = os.path.join(HERE, "other_app.c")
LIBRARIES = ("openmpi", "mpich")
PROGRAMS = ("other-native", "abi-on-openmpi", "abi-on-mpich")
FORMS = ("by-hand", "launcher")
# The standard ABI's mpi.h, as each library installs it (they agree: the ABI is the standard's).
ABI_HEADERS = ("/usr/lib/{arch}/openmpi/include/standard_abi", "/usr/lib/{arch}/mpi_abi_mpich/include")


def case_names():
    return [f"{p}.{f}" for p in PROGRAMS for f in FORMS]


class Skip(Exception):
    pass


def arch():
    return subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip() or "x86_64-linux-gnu"


class Runner:
    def __init__(self, build, workdir):
        self.build = build
        self.workdir = workdir
        self.mpi = mpi_config.load(build)
        self.launcher = os.path.join(build, "bin", "attrcheck")
        self.attrcheck = os.path.join(build, "lib", "libattrcheck.so")
        self.problems = []

    def compile(self, command, what):
        p = subprocess.run(command, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"compiling {what} failed: {' '.join(command)}\n{p.stdout}{p.stderr}")

    def program(self, name):
        """(program, the command that runs it on NP ranks with its library's mpiexec, extra
        environment) for one of PROGRAMS."""
        app = os.path.join(self.workdir, "app")
        if name == "other-native":
            other = next(lib for lib in LIBRARIES if lib != self.mpi.library)
            cc, mpiexec = shutil.which(f"mpicc.{other}"), shutil.which(f"mpiexec.{other}")
            if not cc or not mpiexec:
                raise Skip(f"{other} is not installed (mpicc.{other}, mpiexec.{other})")
            self.compile([cc, SOURCE, "-o", app], f"the program with mpicc.{other}")
            return app, [mpiexec, "-n", str(NP), app], {}
        library = name.split("-")[-1]
        a = arch()
        headers = [h.format(arch=a) for h in ABI_HEADERS if os.path.exists(os.path.join(h.format(arch=a), "mpi.h"))]
        found = sorted(glob.glob(f"/usr/lib/{a}/libmpi_abi_{library}.so.1*"))
        mpiexec = shutil.which(f"mpiexec.{library}")
        if not headers or not found or not mpiexec:
            raise Skip(f"{library} has no MPI standard ABI library here (libmpi_abi_{library}.so.1, the standard ABI's "
                       f"mpi.h, mpiexec.{library}: Debian ships them from MPICH 5.0 and Open MPI 6.0)")
        # Compiled against the ABI's mpi.h, linked by SONAME (libmpi_abi.so.1), whichever library's
        # file it is: the same program for both.
        self.compile(["gcc", f"-I{headers[0]}", SOURCE, "-o", app, found[0]], "the program for the standard ABI")
        chooser = os.path.join(self.workdir, f"libmpi_abi-{library}")
        os.makedirs(chooser, exist_ok=True)
        link = os.path.join(chooser, "libmpi_abi.so.1")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(found[0], link)
        return app, [mpiexec, "-n", str(NP), app], {"LD_LIBRARY_PATH": chooser}

    def run(self, label, command, env):
        p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
        with open(os.path.join(self.workdir, f"{label}.txt"), "w") as f:
            f.write(f"{' '.join(command)}\nexit {p.returncode}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}")
        return p

    def expect(self, ok, what, p=None):
        if not ok:
            detail = f"\n--- stdout\n{p.stdout[-3000:]}--- stderr\n{p.stderr[-3000:]}" if p else ""
            self.problems.append(what + detail)

    def report(self, out):
        path = os.path.join(out, "report.json")
        if not os.path.exists(path):
            if not report_files.rank_files(out):
                return None
            path = os.path.join(self.workdir, "merged.json")
            subprocess.run([os.path.join(self.build, "bin", "attrcheck-report"), "merge", out, "-o", path],
                           capture_output=True, text=True, timeout=120, check=True)
        with open(path) as f:
            return json.load(f)

    def unchecked_status(self):
        """The exit status the launcher's --help gives a run it did not check."""
        text = " ".join(subprocess.run([self.launcher, "--help"], capture_output=True, text=True).stdout.split())
        m = re.search(r"(\d+) if the run was not checked", text)
        if not m:
            raise RuntimeError("the launcher's --help gives no exit status for a run it did not check")
        return int(m.group(1))

    def case(self, name):
        program, form = name.rsplit(".", 1)
        shutil.rmtree(self.workdir, ignore_errors=True)
        os.makedirs(self.workdir)
        app, command, extra = self.program(program)
        env = self.mpi.env(**extra)
        env.pop("LD_PRELOAD", None)
        native = self.run("native", command, env)
        if native.returncode != 0 or "other_app:" not in native.stdout:
            raise RuntimeError(f"the program fails natively (exit {native.returncode}):\n{native.stdout}{native.stderr}")
        out = os.path.join(self.workdir, "attrcheck-out")
        if form == "by-hand":
            p = self.run(form, [*command[:3], "env", f"LD_PRELOAD={self.attrcheck}", f"ATTRCHECK_OUTPUT={out}",
                                *command[3:]], env)
            self.expect(p.returncode == 0, f"exit status {p.returncode}, expected 0 as natively", p)
        else:
            p = self.run(form, [self.launcher, "--mode", "emulate", "--output", out, "--", *command], env)
            status = self.unchecked_status()
            self.expect(p.returncode == status, f"exit status {p.returncode}, expected {status} (not checked, as "
                        "--help says)", p)
            self.expect("tool.other-mpi" in p.stderr, "the launcher's summary does not name tool.other-mpi", p)
        self.expect(p.stdout == native.stdout, f"stdout {p.stdout!r}, natively {native.stdout!r}", p)
        said = [line for line in p.stderr.splitlines() if line.startswith("attrcheck: the program runs on ")]
        self.expect(len(said) == 1, f"{len(said)} lines on stderr say which library the program runs on, expected 1 "
                    "(the first rank's)", p)
        if said:
            self.expect("this attrcheck is built for" in said[0] and re.search(r"\bUse attrcheck built for|no attrcheck for the MPI standard ABI", said[0]),
                        f"the line does not say what attrcheck is built for and what to use: {said[0]}", p)
        for bad in ("Segmentation fault", "MPI_ABORT", "MPI_ERR_", "signal 11", "core dumped"):
            self.expect(bad not in p.stderr, f"stderr has {bad!r}", p)
        merged = self.report(out)
        self.expect(merged is not None, "no rank wrote a report", p)
        if merged is not None:
            rules = sorted({f.get("rule") for f in merged.get("findings", [])})
            self.expect(rules == ["tool.other-mpi"], f"the report's rules are {rules}, expected only tool.other-mpi", p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--list", action="store_true", help="print the case names, one a line")
    ap.add_argument("--build", help="the build directory")
    ap.add_argument("--case", help="the case to run")
    ap.add_argument("--workdir", help="where the runs' files go (default BUILD/tests/other_mpi/run/CASE)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(case_names()))
        return 0
    if not a.build or a.case not in case_names():
        ap.error("--build and one of --list's cases are needed")
    r = Runner(os.path.abspath(a.build), a.workdir or os.path.join(a.build, "tests", "other_mpi", "run", a.case))
    try:
        r.case(a.case)
    except Skip as s:
        print(f"skipped: {s}")
        return SKIP
    for problem in r.problems:
        print(f"FAIL: {problem}\n")
    print(f"{a.case}: {'failed' if r.problems else 'passed'} (runs kept in {r.workdir})")
    return 1 if r.problems else 0


if __name__ == "__main__":
    sys.exit(main())
