#!/usr/bin/env bash
# Instructions per call of the MPI microbenchmark's operations (bench/mpi_attr_bench.c), natively
# and under attrcheck's modes, counted by callgrind: machine-independent, so a regression shows
# even on a noisy machine. Each configuration runs the benchmark twice under
# `valgrind --tool=callgrind`, with every operation executed N and then 2N times
# (`mpi_attr_bench --count`); each operation runs inside its own function
# (bench_<op>_<config>), and the difference of that function's inclusive instruction counts
# between the two runs, divided by N, is the cost of one call: start-up, MPI_Init, first-call
# set-up and the timer calls cancel out.
# Prints, for each operation and keyval configuration ([user] callbacks, [predefined]
# MPI_COMM_DUP_FN / MPI_COMM_NULL_DELETE_FN), instructions per call in each configuration and
# the ratio to native.
#   BUILD_DIR=build-mpich   against MPICH (its launcher is recorded by that build)
#   COUNT=N                 iterations of the smaller run (default 512, at least 128). In the
#                           steady state shadow mode hands its held keyvals out again to the
#                           benchmark's creates (src/runtime/process/keyvals.cpp), so no release batches
#                           fall into the counted runs and any COUNT gives the same keyval rows
# Keyval create + free is counted in the steady state: the benchmark first creates and frees more
# keyvals than shadow mode's quarantine holds, in both runs alike (bench/mpi_attr_bench.c).
#   CONFIGS="native shadow" which configurations (default: native shadow emulate; also off)
#   VALGRIND=path           the valgrind to use
#   THREAD=level            MPI_Init_thread at that level (single, funneled, serialized, multiple:
#                           `mpi_attr_bench --thread`); default MPI_Init
#   STANDARD_ABI=1          the benchmark built for the MPI standard ABI (bench/mpi_attr_bench_abi),
#                           on the build's library's libmpi_abi (chosen with LD_LIBRARY_PATH), natively
#                           and under the standard ABI build (lib/libattrcheck_abi.so): what attrcheck
#                           adds on top of the library's own ABI layer
# Under the modes, valgrind is what the MPI launcher starts, with attrcheck's LD_PRELOAD
# passed through (valgrind hands it to the program); the script checks that attrcheck was
# really loaded and ran (the profile names libattrcheck; the job's report.json has the rank,
# finalized in that mode, with the benchmark's attribute calls among its intercepted counts; no
# finding at warning or error) and fails if not.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
count=${COUNT:-512}
# Both runs must cycle through all 64 keys, or the first touch of some lands in one run only.
[ "$count" -ge 128 ] || { echo "bench-callgrind: COUNT must be at least 128" >&2; exit 2; }
read -r -a configs <<<"${CONFIGS:-native shadow emulate}"
valgrind=${VALGRIND:-valgrind}
command -v "$valgrind" >/dev/null || { echo "bench-callgrind: $valgrind not found (apt-get install valgrind)" >&2; exit 1; }
command -v callgrind_annotate >/dev/null || { echo "bench-callgrind: callgrind_annotate not found" >&2; exit 1; }
mpiexec=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["mpiexec"] or "mpiexec")' \
  "$build/lib/attrcheck/mpi-build.json")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
bench=$build/bench/mpi_attr_bench
bench_args=(--no-pairs)
[ -n "${THREAD:-}" ] && bench_args+=(--thread "$THREAD")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if [ "${STANDARD_ABI:-0}" = 1 ]; then
  bench=$build/bench/mpi_attr_bench_abi
  [ -x "$bench" ] || { echo "bench-callgrind: $bench missing: no MPI library here ships the standard ABI" >&2; exit 2; }
  # (Both libraries' libmpi_abi have the SONAME libmpi_abi.so.1: a link of that name, first on
  # LD_LIBRARY_PATH, picks the build's library's.)
  LD_LIBRARY_PATH=$(python3 - "$build" "$out/libmpi_abi" <<'PY'
import sys
sys.path.insert(0, "tests")
import mpi_config
print(mpi_config.load(sys.argv[1]).standard_abi_env(sys.argv[2])["LD_LIBRARY_PATH"])
PY
  )${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
fi
for c in "${configs[@]}"; do
  for n in "$count" $((2 * count)); do
    vg=("$valgrind" --tool=callgrind "--callgrind-out-file=$out/$c.$n.cg")
    if [ "$c" = native ]; then
      "$mpiexec" -n 1 "${vg[@]}" "$bench" --count "$n" "${bench_args[@]}" >"$out/$c.$n.log" 2>&1 ||
        { cat "$out/$c.$n.log" >&2; exit 1; }
    else
      "$build/bin/attrcheck" --mode "$c" --output "$out/reports-$c.$n" --fail-on never -- \
        "$mpiexec" -n 1 "${vg[@]}" "$bench" --count "$n" "${bench_args[@]}" >"$out/$c.$n.log" 2>&1 ||
        { cat "$out/$c.$n.log" >&2; exit 1; }
      runtime=libattrcheck
      [ "${STANDARD_ABI:-0}" = 1 ] && runtime=libattrcheck_abi
      if ! grep -q "$runtime" "$out/$c.$n.cg"; then
        echo "bench-callgrind: $c: $runtime does not appear in the profile: the preload was lost" >&2
        exit 1
      fi
      # The job's report says what attrcheck did: its one rank finalized in the mode asked for and
      # its wrappers received at least the N attribute calls of each operation (the report's
      # intercepted counts). In off mode, a pass-through, no rank reports.
      python3 - "$out/reports-$c.$n/report.json" "$c" "$n" <<'PY' || { cat "$out/$c.$n.log" >&2; exit 1; }
import json, sys
sys.path.insert(0, "tests")
import report_files
path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
problems, calls = report_files.ran(path, 1, mode)
if mode != "off" and calls.get("attribute", 0) < n:
    problems.append(f"{path}: {calls.get('attribute', 0)} attribute calls intercepted, expected at least {n}")
if problems:
    sys.exit(f"bench-callgrind: {mode}: attrcheck did not run: " + "; ".join(problems))
summary = json.load(open(path))["summary"]
if summary["error"] + summary["warning"]:
    sys.exit(f"bench-callgrind: {mode}: {summary['error'] + summary['warning']} finding(s) at warning or error "
             f"in {path}: the counts include reporting them")
PY
    fi
    callgrind_annotate --inclusive=yes --threshold=100 "$out/$c.$n.cg" >"$out/$c.$n.txt" 2>/dev/null
  done
done
python3 - "$out" "$count" "${configs[@]}" <<'PY'
import os, re, sys
out, n, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
labels = {"get": "get", "set": "set", "setdel": "set+delete", "dupfree": "dup+free (64 attrs)",
          "keyval": "keyval create+free"}
line_re = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+\S*?:?bench_(get|set|setdel|dupfree|keyval)_(user|predefined)\s")

def inclusive(path):
    found = {}
    for line in open(path):
        m = line_re.match(line)
        if m:
            found[(m.group(2), m.group(3))] = int(m.group(1).replace(",", ""))
    return found

per_call = {}
for c in configs:
    small, large = inclusive(f"{out}/{c}.{n}.txt"), inclusive(f"{out}/{c}.{2 * n}.txt")
    for key in large:
        if key in small:
            per_call.setdefault(key, {})[c] = (large[key] - small[key]) / n
thread = os.environ.get("THREAD")
print(f"instructions per call (callgrind, (Ir(2N) - Ir(N)) / N, N = {n})" +
      (f", MPI_Init_thread {thread}" if thread else "") +
      (", the MPI standard ABI" if os.environ.get("STANDARD_ABI") == "1" else ""))
print(f"{'operation':34} " + " ".join(f"{c:>10}" for c in configs) + "  " +
      " ".join(f"{c + '/native':>15}" for c in configs if c != "native" and "native" in configs))
for op in labels:
    for cfg in ("user", "predefined"):
        row = per_call.get((op, cfg), {})
        name = f"{labels[op]} [{cfg}]"
        cells = " ".join(f"{row[c]:10.0f}" if c in row else f"{'-':>10}" for c in configs)
        ratios = " ".join(f"{row[c] / row['native']:15.2f}" if c in row and row.get("native") else f"{'-':>15}"
                          for c in configs if c != "native" and "native" in configs)
        print(f"{name:34} {cells}  {ratios}")
PY
