#!/usr/bin/env bash
# Runs every test: the normal build's ctest suite, then the engine's and the findings store's
# tests again under ThreadSanitizer, then the whole suite (engine, MPI cases, real software) with
# attrcheck's own code built under UndefinedBehaviorSanitizer. Installs what it needs and builds
# first.
# ATTRCHECK_MPI=mpich: the build and its suite are MPICH's (build-mpich/, programs started with
# mpiexec.mpich); the default is the system's MPI (Open MPI on Debian). ATTRCHECK_SKIP_SANITIZERS=1
# leaves out the two sanitizer passes (CI runs them once, with the default MPI, not per library).
# ATTRCHECK_DEBIAN=trixie (or bookworm): all of this inside a Debian root of that release, made
# from Debian's own packages and kept for the next run (scripts/in-debian.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ATTRCHECK_DEBIAN:-}" ]; then
  exec bash scripts/in-debian.sh "$ATTRCHECK_DEBIAN" bash scripts/test.sh
fi
mpi=${ATTRCHECK_MPI:-}
build_dir=${BUILD_DIR:-build${mpi:+-$mpi}}

echo "== build (RelWithDebInfo${mpi:+, $mpi}) =="
BUILD_DIR=$build_dir bash scripts/build.sh -DATTRCHECK_BUILD_TESTS=ON -DATTRCHECK_BUILD_BENCH=ON
# One test more than there are cores: a test spends part of its time waiting for its MPI launcher
# to start the ranks (Open MPI 6.0's takes longest), time another test can use.
jobs=$(( $(nproc) + 1 ))
echo "== tests (${mpi:-default MPI}) =="
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"

if [ "${ATTRCHECK_SKIP_SANITIZERS:-0}" = 1 ]; then
  exit 0
fi

echo "== ThreadSanitizer build of the engine, the findings store and their tests =="
ATTRCHECK_MPI= BUILD_DIR=build-tsan bash scripts/build.sh -DATTRCHECK_SANITIZE=thread -DATTRCHECK_BUILD_BENCH=OFF
# halt_on_error: any race fails the run; second_deadlock_stack: full reports for lock cycles.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -L 'engine|report'

# libubsan is an ordinary dependency of the preloaded library, so this build runs everything: the
# runtime's hooks and trampolines under real mpirun, on garbage input and on real software. The
# programs under test are not instrumented (tests/CMakeLists.txt). halt_on_error: a rank that
# reaches undefined behaviour exits non-zero, and its test fails with the report on stderr.
echo "== UndefinedBehaviorSanitizer build of everything, the whole suite =="
ATTRCHECK_MPI= BUILD_DIR=build-ubsan bash scripts/build.sh -DATTRCHECK_SANITIZE=undefined -DATTRCHECK_BUILD_BENCH=OFF
UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}" \
  ctest --test-dir build-ubsan --output-on-failure -j "$(nproc)"
