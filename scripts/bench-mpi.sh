#!/usr/bin/env bash
# The MPI microbenchmark, natively and under each attrcheck mode, in one run; prints ns/op and
# the ratio to native for each operation (get, set, set+delete, dup+free, keyval create+free) in
# each keyval configuration ([user]: user callbacks; [predefined]: MPI_COMM_DUP_FN /
# MPI_COMM_NULL_DELETE_FN). Rounds alternate the configurations so that machine noise hits
# all of them alike; each cell is the best of its rounds.
# Then the paired in-process ratios (bench/mpi_attr_bench.c: the library's own PMPI_ calls
# against the same calls through the tool, alternating inside one process): the median over
# the rounds. Natively they are ~1.00, which checks the method.
set -euo pipefail
cd "$(dirname "$0")/.."
# BUILD_DIR=build-mpich: against MPICH (started with the launcher that build recorded).
# ROUNDS=n rounds (default 3); SCALE=k multiplies the iteration counts; COUNT=n runs every
# operation exactly n times, once per round (`mpi_attr_bench --count`: for tests, not timing).
build=${BUILD_DIR:-build}
rounds=${ROUNDS:-3}
mpiexec=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["mpiexec"] or "mpiexec")' \
  "$build/lib/attrcheck/mpi-build.json")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
bench=$build/bench/mpi_attr_bench
bench_args=("${SCALE:-1}")
[ -n "${COUNT:-}" ] && bench_args+=(--count "$COUNT")
# THREAD=level: MPI_Init_thread at that level (single, funneled, serialized, multiple).
[ -n "${THREAD:-}" ] && bench_args+=(--thread "$THREAD")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
configs=(native off shadow emulate)
for ((r = 0; r < rounds; r++)); do
  for c in "${configs[@]}"; do
    if [ "$c" = native ]; then
      "$mpiexec" -n 1 "$bench" "${bench_args[@]}" >>"$out/$c"
    else
      "$build/bin/attrcheck" --mode "$c" --output "$out/reports-$c" --fail-on never -- \
        "$mpiexec" -n 1 "$bench" "${bench_args[@]}" >>"$out/$c" 2>/dev/null
    fi
  done
done
python3 - "$out" "${configs[@]}" <<'PY'
import sys, collections, statistics
out, configs = sys.argv[1], sys.argv[2:]
best = collections.OrderedDict()
for c in configs:
    for line in open(f"{out}/{c}"):
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "op":
            name = " ".join(parts[1:-2]); ns = float(parts[-1])
            best.setdefault(name, {})
            best[name][c] = min(ns, best[name].get(c, ns))
print(f"{'operation':34} " + " ".join(f"{c + ' ns':>12}" for c in configs) + "  " +
      " ".join(f"{c + '/native':>15}" for c in configs[1:]))
for name, row in best.items():
    print(f"{name:34} " + " ".join(f"{row.get(c, float('nan')):12.1f}" for c in configs) + "  " +
          " ".join(f"{row.get(c, float('nan')) / row['native']:15.2f}" for c in configs[1:]))

pairs = collections.OrderedDict()
for c in configs:
    for line in open(f"{out}/{c}"):
        parts = line.split()
        if len(parts) >= 8 and parts[0] == "pair" and parts[-2] == "ratio":
            pairs.setdefault(" ".join(parts[1:-6]), {}).setdefault(c, []).append(float(parts[-1]))
if pairs:
    print()
    print("paired in one process, tool / library (median of the rounds' medians):")
    print(f"{'operation':34} " + " ".join(f"{c:>12}" for c in configs))
    for name, row in pairs.items():
        print(f"{name:34} " + " ".join(f"{statistics.median(row[c]):12.2f}" if c in row else f"{'-':>12}"
                                      for c in configs))
PY
