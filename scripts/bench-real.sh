#!/usr/bin/env bash
# Whole-program overhead on real clients in time: PETSc ksp ex2 (-m 500 -n 500) and snes ex19
# (a 513 x 513 grid: -da_grid_x 5 -da_grid_y 5 -da_refine 7, ~9 s natively on this 2-core
# machine when it is quiet; -da_refine 6 on the default grid takes ~1.8 s) at 2 ranks, the
# real-client tests' mpi4py program and parallel HDF5's ph5example at 2 ranks (on an MPICH build,
# BUILD_DIR=build-mpich, only ph5example: Debian builds the others on Open MPI); each natively,
# under shadow and under emulate,
# the configurations interleaved within each round (their order rotating), wall-clock seconds of
# the whole mpiexec.
# Prints the median of the rounds per client and configuration and the ratios to native. Fails if
# a run fails, or a checked run's report does not show both ranks finalized in its mode.
#   BUILD_DIR=dir   a build with the real-client tests (default build; build-mpich for MPICH)
#   ROUNDS=N        rounds (default 5)
#   CLIENTS="ksp_ex2 snes_ex19 mpi4py hdf5 true"   which clients (true: `mpiexec -n 2 true`,
#                   the launcher's fixed cost; default: all the build's MPI has)
#   PRELOAD=1       also each mode without the launcher (mpiexec -x LD_PRELOAD=libattrcheck.so
#                   -x ATTRCHECK_MODE=..., or Hydra's -genv): the runtime's own cost, without the
#                   launcher's start-up and its merge and summary of the reports after the run
# Needs scripts/build.sh first (the PETSc tutorials are built with the real-client tests).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
exec python3 - "$build" "${ROUNDS:-5}" "${CLIENTS:-}" "${PRELOAD:-0}" <<'PY'
import json, os, shutil, statistics, subprocess, sys, tempfile, time
build, rounds, clients, preload = os.path.abspath(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(), sys.argv[4] == "1"
sys.path.insert(0, os.path.abspath("tests"))
import report_files  # noqa: E402  (what shows that attrcheck ran: the job's report)
mpi = json.load(open(f"{build}/lib/attrcheck/mpi-build.json"))
mpiexec = mpi["mpiexec"] or "mpiexec"
openmpi = mpi["library"] == "openmpi"
if not clients:
    clients = ["ksp_ex2", "snes_ex19", "mpi4py", "hdf5", "true"] if openmpi else ["hdf5", "true"]
# The Python the real-client tests found mpi4py and numpy in (CMake cache), not whatever is first
# on PATH.
python = next((line.split("=", 1)[1].strip() for line in open(f"{build}/CMakeCache.txt")
               if line.startswith("ATTRCHECK_REAL_PYTHON:")), "/usr/bin/python3")
commands = {
    "ksp_ex2": [f"{build}/tests/real/petsc_ksp_ex2", "-m", "500", "-n", "500"],
    "snes_ex19": [f"{build}/tests/real/petsc_snes_ex19", "-da_grid_x", "5", "-da_grid_y", "5", "-da_refine", "7",
                  "-pc_type", "mg", "-ksp_type", "fgmres", "-pc_mg_type", "full"],
    "mpi4py": [python, os.path.abspath("tests/real/mpi4py_client.py")],
    # Parallel HDF5 (the MPICH flavour on an MPICH build): its files go to the run's directory.
    "hdf5": [f"{build}/tests/real/hdf5_ph5example"],
    # No MPI program at all: what starting 2 ranks costs, and the launcher's own fixed cost.
    "true": ["true"],
}
configs = ["native", "shadow", "emulate"] + (["shadow-preload", "emulate-preload"] if preload else [])
modes = [m for m in configs if m != "native"]
library = os.path.abspath(f"{build}/lib/libattrcheck.so")
times = {(c, m): [] for c in clients for m in configs}
out = tempfile.mkdtemp()
try:
    for r in range(rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for c in clients:
            for m in order:
                cmd = [mpiexec, "-n", "2"] + commands[c]
                if m.endswith("-preload"):
                    env = {"LD_PRELOAD": library, "ATTRCHECK_MODE": m[:-8], "ATTRCHECK_OUTPUT": f"{out}/{c}.{m}.{r}",
                           "ATTRCHECK_RANK_SUMMARY": "0"}
                    cmd = [mpiexec, "-n", "2"]
                    for k, v in env.items():
                        cmd += ["-x", f"{k}={v}"] if openmpi else ["-genv", k, v]
                    cmd += commands[c]
                elif m != "native":
                    cmd = [f"{build}/bin/attrcheck", "--mode", m, "--output", f"{out}/{c}.{m}.{r}",
                           "--fail-on", "never", "--"] + cmd
                t0 = time.monotonic()
                p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=out)
                t = time.monotonic() - t0
                if p.returncode != 0:
                    sys.exit(f"bench-real: {c} {m} failed ({p.returncode}):\n{p.stderr[-2000:]}")
                if m != "native" and c != "true":  # `true` calls no MPI: nothing to report
                    problems, _ = report_files.ran(f"{out}/{c}.{m}.{r}/report.json", 2, m.removesuffix("-preload"))
                    if problems:
                        sys.exit(f"bench-real: {c} {m}: attrcheck did not run: " + "; ".join(problems))
                times[(c, m)].append(t)
            print(f"round {r + 1}/{rounds} {c}: " +
                  " ".join(f"{m} {times[(c, m)][-1]:.2f}s" for m in configs), file=sys.stderr, flush=True)
finally:
    shutil.rmtree(out, ignore_errors=True)
print(f"whole program, 2 ranks, median of {rounds} interleaved rounds (wall-clock seconds)")
med = {(c, m): statistics.median(times[(c, m)]) for c in clients for m in configs}
fixed = {m: med[("true", m)] - med[("true", "native")] for m in modes} if "true" in clients else None
print(f"{'client':12} " + " ".join(f"{m:>15}" for m in configs) + "  " + " ".join(f"{m + '/native':>22}" for m in modes))
for c in clients:
    n = med[(c, "native")]
    print(f"{c:12} " + " ".join(f"{med[(c, m)]:15.2f}" for m in configs) + "  " +
          " ".join(f"{med[(c, m)] / n:22.3f}" for m in modes))
if fixed:
    print("beyond the fixed cost of starting 2 ranks under each (the `true` row), in % of native:")
    for c in clients:
        if c != "true":
            n = med[(c, "native")]
            print(f"{c:12} " + " ".join(f"{m} {100 * (med[(c, m)] - n - fixed[m]) / n:+.1f}%" for m in modes))
PY
