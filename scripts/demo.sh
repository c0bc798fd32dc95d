#!/usr/bin/env bash
# The main job: builds attrcheck, then runs the demo MPI program (examples/demo.c, a few seeded
# attribute bugs) on 2 ranks under the checker and prints its report.
# Extra arguments go to the launcher, e.g. --mode emulate.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >&2
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # Open MPI refuses root otherwise
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}  # 2 ranks on small machines
out=build/demo-report
status=0
./build/bin/attrcheck --output "$out" "$@" -- mpirun -np 2 ./build/examples/demo || status=$?
echo
echo "== the merged report ($out/report.json) =="
cat "$out/report.json"
echo
echo "attrcheck exit status: $status (non-zero: the demo's seeded bugs are errors, as a CI gate would see them)"
