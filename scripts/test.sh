#!/usr/bin/env bash
# Runs every test: the normal build's ctest suite, then the engine suites again under
# ThreadSanitizer. Installs what it needs and builds first.
# ATTRCHECK_MPI=mpich: the build and its suite are MPICH's (build-mpich/, programs started with
# mpiexec.mpich); the default is the system's MPI (Open MPI on Debian). ATTRCHECK_SKIP_TSAN=1
# leaves out the ThreadSanitizer pass (it has no MPI in it: CI runs it once, not per library).
set -euo pipefail
cd "$(dirname "$0")/.."
mpi=${ATTRCHECK_MPI:-}
build_dir=${BUILD_DIR:-build${mpi:+-$mpi}}

echo "== build (RelWithDebInfo${mpi:+, $mpi}) =="
BUILD_DIR=$build_dir bash scripts/build.sh
echo "== tests (${mpi:-default MPI}) =="
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"

if [ "${ATTRCHECK_SKIP_TSAN:-0}" = 1 ]; then
  exit 0
fi

echo "== ThreadSanitizer build of the engine and its tests =="
ATTRCHECK_MPI= BUILD_DIR=build-tsan bash scripts/build.sh -DATTRCHECK_SANITIZE=thread -DATTRCHECK_BUILD_BENCH=OFF
# halt_on_error: any race fails the run; second_deadlock_stack: full reports for lock cycles.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -L engine
