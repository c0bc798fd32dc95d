#!/usr/bin/env python3
"""attrcheck: run an MPI program under the attribute-caching checker.

usage: attrcheck [options] -- COMMAND [ARGS...]

Typical uses:
  attrcheck -- mpirun -np 4 ./app        preload into every rank mpirun starts (locally)
  mpirun -np 4 attrcheck -- ./app        each rank preloads itself (no -x needed)

options:
  --mode MODE          shadow (default): forward every call to MPI and cross-check it;
                       emulate: attrcheck's cache serves all user keyvals and attributes;
                       off: pass-through (overhead baseline)             [ATTRCHECK_MODE]
  --output DIR         where per-rank reports and the merged DIR/report.json go
                       (default: ./attrcheck-out)                        [ATTRCHECK_OUTPUT]
  --on-error POLICY    what an erroneous call does after it is reported:
                       report (default): it is not passed on and returns the error class
                       the standard prescribes (a user-defined error handler is still called);
                       errhandler: the object's error handler is invoked (the default one
                       aborts) once the report is on disk; abort: report, then MPI_Abort
                                                                         [ATTRCHECK_ON_ERROR]
  --fail-on SEVERITY   exit non-zero if findings at or above SEVERITY exist:
                       error (default), warning, info, never
  --suppressions FILE  findings to leave out of the merged report, the summary and the
                       gate (kept in it as suppressed counts); lines "RULE_GLOB KIND:GLOB",
                       KIND fun, lib, src or at (see README, Suppressions)
                                                                [ATTRCHECK_SUPPRESSIONS]
  --no-default-suppressions
                       do not apply the default suppressions shipped with attrcheck
                       (lib/attrcheck/default.supp: benign patterns of well-known libraries)
  --stack-depth N      frames recorded per stack, 0..16 (default 16) [ATTRCHECK_STACK_DEPTH]
  --provenance WHAT    what keyval creations and frees record for findings: stack
                       (default: the whole stack, a few microseconds each) or site (the
                       call site only, near free)                    [ATTRCHECK_PROVENANCE]
  --help, --version

exit status: the command's own status if it failed (signals as 128+N); otherwise 1 if
findings at or above --fail-on were reported; otherwise 0. Errors in attrcheck's own
arguments exit 2.
"""
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
# Build tree and install tree share the layout: bin/attrcheck, lib/libattrcheck.so,
# lib/attrcheck/attrcheck_report.py.
LIBDIR = os.path.normpath(os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(LIBDIR, "attrcheck"))

import attrcheck_report as reports  # noqa: E402

VERSION = "0.1.0"
CHOICES = {
    "--mode": ("shadow", "emulate", "off"),
    "--on-error": ("report", "errhandler", "abort"),
    "--fail-on": ("error", "warning", "info", "never"),
    "--provenance": ("stack", "site"),
}
RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")


def die(message):
    print(f"attrcheck: error: {message}", file=sys.stderr)
    print("attrcheck: see 'attrcheck --help'", file=sys.stderr)
    sys.exit(2)


def parse(argv):
    opts = {"--mode": os.environ.get("ATTRCHECK_MODE", "shadow"),
            "--output": os.environ.get("ATTRCHECK_OUTPUT", "attrcheck-out"),
            "--on-error": os.environ.get("ATTRCHECK_ON_ERROR", "report"),
            "--fail-on": "error",
            "--suppressions": os.environ.get("ATTRCHECK_SUPPRESSIONS", ""),
            "--stack-depth": os.environ.get("ATTRCHECK_STACK_DEPTH", "16"),
            "--provenance": os.environ.get("ATTRCHECK_PROVENANCE", "stack")}
    opts["--no-default-suppressions"] = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            command = argv[i + 1:]
            break
        if arg == "--no-default-suppressions":
            opts[arg] = True
            i += 1
            continue
        if arg in ("-h", "--help"):
            print(__doc__.strip())
            sys.exit(0)
        if arg == "--version":
            print(f"attrcheck {VERSION}")
            sys.exit(0)
        name, eq, value = arg.partition("=")
        if name in opts:
            if not eq:
                if i + 1 >= len(argv):
                    die(f"{name} needs a value")
                i += 1
                value = argv[i]
            opts[name] = value
            i += 1
            continue
        if arg.startswith("-"):
            die(f"unknown option '{arg}'")
        command = argv[i:]  # no '--': the command starts at the first non-option
        break
    else:
        command = []
    for name, allowed in CHOICES.items():
        if opts[name] not in allowed:
            die(f"{name} must be one of {', '.join(allowed)} (got '{opts[name]}')")
    if not opts["--output"]:
        die("--output must not be empty")
    if not opts["--stack-depth"].isdigit() or int(opts["--stack-depth"]) > 16:
        die(f"--stack-depth must be a number of frames from 0 to 16 (got '{opts['--stack-depth']}')")
    if not command:
        die("no command given (usage: attrcheck [options] -- COMMAND...)")
    return opts, command


def library():
    path = os.path.join(LIBDIR, "libattrcheck.so")
    if not os.path.exists(path):
        die(f"the attrcheck library is missing: {path}")
    return path


def run(command, env):
    try:
        # Every inherited descriptor stays open: MPICH's Hydra passes each rank its PMI connection
        # as one (PMI_FD), and the rank started under `mpiexec ... attrcheck -- app` must get it.
        child = subprocess.Popen(command, env=env, close_fds=False)
    except OSError as e:
        die(f"cannot run {command[0]}: {e.strerror}")
    # Pass interrupts on to the command (mpirun then stops its ranks) and wait for it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    status = child.wait()
    return 128 - status if status < 0 else status


def main(argv):
    opts, command = parse(argv)
    output = os.path.abspath(opts["--output"])
    suppressions = []
    try:  # before the run: a malformed file must not cost a whole job
        if opts["--suppressions"]:
            suppressions += reports.load_suppressions(opts["--suppressions"])
        if not opts["--no-default-suppressions"]:
            suppressions += reports.default_suppressions()
    except reports.ReportError as e:
        die(str(e))
    inner = any(v in os.environ for v in RANK_ENV)  # `mpirun ... attrcheck -- app`: one rank
    try:
        os.makedirs(output, exist_ok=True)
    except OSError as e:
        die(f"cannot create {output}: {e.strerror}")
    if not inner:
        # A fresh run: stale per-rank reports of an earlier run must not be merged in.
        reports.clean(output)

    env = dict(os.environ)
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = library() + (":" + preload if preload else "")
    env["ATTRCHECK_MODE"] = opts["--mode"]
    env["ATTRCHECK_OUTPUT"] = output
    env["ATTRCHECK_ON_ERROR"] = opts["--on-error"]
    env["ATTRCHECK_STACK_DEPTH"] = opts["--stack-depth"]
    env["ATTRCHECK_PROVENANCE"] = opts["--provenance"]
    env["ATTRCHECK_RANK_SUMMARY"] = "0"  # the launcher prints the merged summary instead

    status = run(command, env)

    merged = reports.merge_directory(output, command=command, exit_code=None if inner else status,
                                     suppressions=suppressions)
    gating = reports.at_or_above(merged["findings"], opts["--fail-on"])
    if inner:
        # Every rank merges what has finished so far; the one that completes the set prints.
        rank = int(next(os.environ[v] for v in RANK_ENV if v in os.environ))
        if reports.complete(output, merged) and reports.claim_once(output, "summary"):
            sys.stderr.write(reports.summary_text(merged))
        mine = [f for f in gating if rank in f.get("ranks", [])]
        return status if status else (1 if mine else 0)

    if not merged["ranks"] and opts["--mode"] != "off":
        print(f"attrcheck: no reports were written to {output}: did the command start an MPI program?",
              file=sys.stderr)
    sys.stderr.write(reports.summary_text(merged))
    print(f"attrcheck: report: {os.path.join(output, 'report.json')}", file=sys.stderr)
    if status:
        print(f"attrcheck: the command failed with exit status {status}", file=sys.stderr)
        return status
    return 1 if gating else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
