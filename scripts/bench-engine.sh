#!/usr/bin/env bash
# The engine benchmark next to the MPI library's own attribute cache (Open MPI's in build/),
# measured in the same run (alternating rounds, best of each), so the comparison survives a
# shared, noisy machine.
# Prints ns/op for both, their ratio, and the engine's targets; fails if a row has no figure.
#   BUILD_DIR=dir   the build (default build; build-mpich: next to MPICH's cache, with its launcher)
#   ROUNDS=N        rounds (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
rounds=${ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi=$build/lib/attrcheck/mpi-build.json
mpiexec=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["mpiexec"] or "mpiexec")' "$mpi")
library=$(python3 -c 'import json, sys; print({"openmpi": "Open MPI", "mpich": "MPICH"}[json.load(open(sys.argv[1]))["library"]])' "$mpi")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
filter='BM_GetAttr/hit/64$|BM_SetDeleteAttr/null_delete$|BM_DupFree64/user_copy_delete$|BM_KeyvalCreateFree$|BM_AttributeBytes64/c/64$'
for ((r = 0; r < rounds; r++)); do
  "$build/bench/engine_bench" --benchmark_filter="$filter" --benchmark_min_time=0.2 \
    --benchmark_format=json >"$out/engine.$r.json" 2>/dev/null
  "$mpiexec" -n 1 "$build/bench/mpi_attr_bench" --no-pairs >"$out/native.$r.txt"
done
python3 - "$out" "$rounds" "$library" <<'PY'
import json, sys
out, rounds, library = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [  # label, engine benchmark, MPI benchmark op (mpi_attr_bench's name and keyval configuration), target
    ("get (64 keys)", "BM_GetAttr/hit/64", "get [user]", "<= 5 ns"),
    ("set+delete", "BM_SetDeleteAttr/null_delete", "set+delete [predefined]", "<= 20 ns"),
    ("dup+free, 64 attrs", "BM_DupFree64/user_copy_delete", "dup+free (64 attrs) [user]", "dup <= 2 us"),
    ("keyval create+free", "BM_KeyvalCreateFree", "keyval create+free [user]", ""),
]
engine, native, mem = {}, {}, None
for r in range(rounds):
    for b in json.load(open(f"{out}/engine.{r}.json"))["benchmarks"]:
        name = b["name"]
        if name.startswith("BM_AttributeBytes64"):
            mem = b.get("bytes_per_attr")
            continue
        engine[name] = min(engine.get(name, 1e18), b["cpu_time"])
    for line in open(f"{out}/native.{r}.txt"):
        p = line.split()
        if len(p) >= 4 and p[0] == "op":
            op = " ".join(p[1:-2]); native[op] = min(native.get(op, 1e18), float(p[-1]))
print(f"{'operation':20} {'engine ns':>10} {library + ' ns':>12} {'engine/MPI':>12}  target")
for label, eb, nb, target in rows:
    e, n = engine.get(eb), native.get(nb)
    if not e or not n:
        sys.exit(f"bench-engine: no figure for {label}: engine {eb} {e}, {library} {nb!r} {n}")
    ratio = f"{e / n:12.2f}" if e and n else f"{'-':>12}"
    print(f"{label:20} {e or float('nan'):10.1f} {n or float('nan'):12.1f} {ratio}  {target}")
if mem is not None:
    print(f"{'bytes per attribute':20} {mem:10.1f} {'':>12} {'':>12}  <= 64 B")
PY
