#!/usr/bin/env bash
# Whole-program overhead in instructions (machine-independent, unlike bench-real.sh's
# wall clock): each real client as a singleton (1 rank, no launcher) under callgrind, whole
# process from start to exit, natively and with LD_PRELOAD=libattrcheck.so ATTRCHECK_MODE=shadow
# / emulate. Natively libstdc++ is preloaded too: libattrcheck needs it, and where it is loaded
# changes the dynamic linker's work by more than the tool costs (docs/performance.md, "Whole programs").
# Each checked run must print what the native run printed (timing lines aside), leave the job's
# report with its rank finalized in that mode and calls intercepted, and report no finding at
# warning or error level; the script fails otherwise.
#   BUILD_DIR=dir   the build (default build; build-mpich for MPICH)
#   CLIENTS="..."   which clients (default: all the build's MPI has): scalapack_qr (ScaLAPACK's
#                   QR / QL / LQ / RQ / QP / TZ driver, 300 x 300, blocks of 32), hdf5
#                   (ph5example), and on Open MPI ksp_ex2 (-m 200 -n 200) and snes_ex19 (multigrid
#                   on a 65 x 65 grid)
# Needs scripts/build.sh first (the real-client tests build ph5example and the PETSc tutorials).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
command -v valgrind >/dev/null || { echo "bench-real-callgrind: needs valgrind" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec python3 - "$build" "${CLIENTS:-}" "$PWD" <<'PY'
import json, os, re, shutil, subprocess, sys, tempfile
build, clients, root = os.path.abspath(sys.argv[1]), sys.argv[2].split(), sys.argv[3]
sys.path.insert(0, os.path.join(root, "tests"))
import report_files  # noqa: E402  (what shows that attrcheck ran: the job's report)
mpi = json.load(open(f"{build}/lib/attrcheck/mpi-build.json"))
library = mpi["library"]
arch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
scalapack = f"/usr/lib/{arch}/scalapack/{library}-tests"
commands = {  # client: (command, input files copied into the run's directory)
    "scalapack_qr": ([f"{scalapack}/xdqr"], [f"{root}/bench/real/QR.dat"]),
    "hdf5": ([f"{build}/tests/real/hdf5_ph5example"], []),
    "ksp_ex2": ([f"{build}/tests/real/petsc_ksp_ex2", "-m", "200", "-n", "200"], []),
    "snes_ex19": ([f"{build}/tests/real/petsc_snes_ex19", "-da_grid_x", "5", "-da_grid_y", "5", "-da_refine", "4",
                   "-pc_type", "mg", "-ksp_type", "fgmres", "-pc_mg_type", "full"], []),
}
if not clients:
    clients = ["scalapack_qr", "hdf5"] + (["ksp_ex2", "snes_ex19"] if library == "openmpi" else [])
so = f"{build}/lib/libattrcheck.so"
ldd = subprocess.run(["ldd", so], capture_output=True, text=True).stdout
stdcxx = re.search(r"libstdc\+\+\S*\s+=>\s+(\S+)", ldd).group(1)
# ScaLAPACK's line of times and MFLOPS of a passed (or unchecked) test; a FAILED one is compared,
# as in the real-client tests (tests/real/CMakeLists.txt, scalapack_timing).
timing = re.compile(r"^(WALL|CPU) .* (PASSED|BYPASS)\b")


def run(client, mode, work):
    command, inputs = commands[client]
    d = os.path.join(work, f"{client}.{mode}")
    os.makedirs(d)
    for f in inputs:
        shutil.copy(f, d)
    env = dict(os.environ)
    if mode == "native":
        env["LD_PRELOAD"] = stdcxx
    else:
        env.update(LD_PRELOAD=so, ATTRCHECK_MODE=mode, ATTRCHECK_OUTPUT=os.path.join(d, "report"))
    cg = os.path.join(d, "callgrind.out")
    p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", *command], cwd=d, env=env,
                       capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"bench-real-callgrind: {client} {mode} exited {p.returncode}:\n{p.stderr[-2000:]}")
    total = next(int(line.split()[1]) for line in open(cg) if line.startswith(("summary:", "totals:")))
    findings = 0
    if mode != "native":  # the job's report: the rank finalized in this mode, its calls intercepted
        report = os.path.join(d, "report", "report.json")
        problems, _ = report_files.ran(report, 1, mode)
        if problems:
            sys.exit(f"bench-real-callgrind: {client} {mode}: attrcheck did not run: " + "; ".join(problems))
        s = json.load(open(report))["summary"]
        findings = s["error"] + s["warning"]
    out = [line for line in p.stdout.splitlines() if not timing.search(line)]
    return total, out, findings


work = tempfile.mkdtemp(prefix="attrcheck-bench-real-cg-")
try:
    print(f"whole process, 1 rank, callgrind instructions ({library}; native with libstdc++ preloaded)")
    print(f"{'client':14} {'native':>15} {'shadow':>15} {'':>9} {'emulate':>15} {'':>9}")
    for c in clients:
        native, native_out, _ = run(c, "native", work)
        row = [f"{c:14} {native:15,}"]
        for mode in ("shadow", "emulate"):
            total, out, findings = run(c, mode, work)
            if out != native_out:
                sys.exit(f"bench-real-callgrind: {c} under {mode} printed other output than natively")
            if findings:
                sys.exit(f"bench-real-callgrind: {c} under {mode}: {findings} finding(s) at warning or error level")
            row.append(f"{total:15,} {100 * (total - native) / native:+8.2f}%")
        print(" ".join(row), flush=True)
finally:
    shutil.rmtree(work, ignore_errors=True)
PY
