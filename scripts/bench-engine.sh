#!/usr/bin/env bash
# The engine benchmark next to Open MPI's own attribute cache, measured in the same run
# (alternating rounds, best of each), so the comparison survives a shared, noisy machine.
# Prints ns/op for both, their ratio, and the engine's targets.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
rounds=${ROUNDS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
filter='BM_GetAttr/hit/64$|BM_SetDeleteAttr/null_delete$|BM_DupFree64/user_copy_delete$|BM_KeyvalCreateFree$|BM_AttributeBytes64/c/64$'
for ((r = 0; r < rounds; r++)); do
  "$build/bench/engine_bench" --benchmark_filter="$filter" --benchmark_min_time=0.2 \
    --benchmark_format=json >"$out/engine.$r.json" 2>/dev/null
  mpirun -np 1 "$build/bench/mpi_attr_bench" >"$out/native.$r.txt"
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = [  # label, engine benchmark, MPI benchmark op, target
    ("get (64 keys)", "BM_GetAttr/hit/64", "get", "<= 5 ns"),
    ("set+delete", "BM_SetDeleteAttr/null_delete", "set+delete", "<= 20 ns"),
    ("dup+free, 64 attrs", "BM_DupFree64/user_copy_delete", "dup+free (64 attrs)", "dup <= 2 us"),
    ("keyval create+free", "BM_KeyvalCreateFree", "keyval create+free", ""),
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
print(f"{'operation':20} {'engine ns':>10} {'Open MPI ns':>12} {'engine/OMPI':>12}  target")
for label, eb, nb, target in rows:
    e, n = engine.get(eb), native.get(nb)
    ratio = f"{e / n:12.2f}" if e and n else f"{'-':>12}"
    print(f"{label:20} {e or float('nan'):10.1f} {n or float('nan'):12.1f} {ratio}  {target}")
if mem is not None:
    print(f"{'bytes per attribute':20} {mem:10.1f} {'':>12} {'':>12}  <= 64 B")
PY
