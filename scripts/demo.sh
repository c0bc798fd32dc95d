#!/usr/bin/env bash
# The main job: builds attrcheck, then runs the demo MPI program (examples/demo.c, a few seeded
# attribute bugs) on 2 ranks under the checker: the launcher prints its summary, and the script
# ends with where the merged report is and an HTML page rendered from it.
# Extra arguments go to the launcher, e.g. --mode emulate. ATTRCHECK_MPI=mpich: against MPICH
# (build-mpich/, mpiexec.mpich).
set -euo pipefail
cd "$(dirname "$0")/.."
mpi=${ATTRCHECK_MPI:-}
build=${BUILD_DIR:-build${mpi:+-$mpi}}
# Only what the demo needs is installed and built; a build directory that exists keeps its options
# (scripts/test.sh turns the tests on in it).
options=()
[ -f "$build/CMakeCache.txt" ] || options=(-DATTRCHECK_BUILD_TESTS=OFF -DATTRCHECK_BUILD_BENCH=OFF)
ATTRCHECK_DEPS=demo BUILD_DIR=$build bash scripts/build.sh "${options[@]}" >&2
# The MPI library's own launcher, as the build recorded it.
mpiexec=$(sed -n 's/.*"mpiexec": "\([^"]*\)".*/\1/p' "$build/lib/attrcheck/mpi-build.json")
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # Open MPI refuses root otherwise
fi
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}  # 2 ranks on small machines
out=$build/demo-report
status=0
"./$build/bin/attrcheck" --output "$out" "$@" -- "${mpiexec:-mpiexec}" -n 2 "./$build/examples/demo" || status=$?
"./$build/bin/attrcheck-report" html "$out" -o "$out/report.html" --force
echo
echo "merged report: $out/report.json"
echo "HTML page:     $out/report.html   (open it in a browser: filter, expand stacks and provenance)"
echo "attrcheck exit status: $status (non-zero: the demo's seeded bugs are errors, as a CI gate would see them)"
