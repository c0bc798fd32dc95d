#!/usr/bin/env bash
# Runs every test: the normal build's ctest suite, then the engine's and the findings store's
# tests again under ThreadSanitizer, then the whole suite (engine, MPI cases, real software) with
# attrcheck's own code built under UndefinedBehaviorSanitizer. With the sanitizer passes, the
# normal build runs only the tests the UndefinedBehaviorSanitizer build does not have (the
# commands of the README and docs, the benchmarks): the others would run twice on the same
# library, once instrumented. Installs what it needs and builds first. The C++ compiles go through
# ccache where it is installed: the MPI-independent four fifths of a build (engine, report, tools
# and their tests) are then compiled once for both libraries.
# ATTRCHECK_MPI=mpich: the build and its suite are MPICH's (build-mpich/, programs started with
# mpiexec.mpich); the default is the system's MPI (Open MPI on Debian). ATTRCHECK_SKIP_SANITIZERS=1
# leaves out the two sanitizer passes (CI runs them once, with the default MPI, not per library).
# ATTRCHECK_SKIP_SCRIPTS=1 leaves out the label scripts, the README's and docs' commands at their
# smallest size (CI runs them on the machine's own release, for both libraries, and not again in
# the other releases' roots).
# ATTRCHECK_DEBIAN=trixie (or bookworm): all of this inside a Debian root of that release, made
# from Debian's own packages and kept for the next run (scripts/in-debian.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${ATTRCHECK_DEBIAN:-}" ]; then
  exec bash scripts/in-debian.sh "$ATTRCHECK_DEBIAN" bash scripts/test.sh
fi
mpi=${ATTRCHECK_MPI:-}
build_dir=${BUILD_DIR:-build${mpi:+-$mpi}}

sanitizers=1
[ "${ATTRCHECK_SKIP_SANITIZERS:-0}" = 1 ] && sanitizers=0
# ccache: the object of a file is the same in every build of this tree but for the build
# directory, which only the debug information's compilation directory names (hash_dir off; the
# sources' paths in it are absolute). Only the C++ compiles: the MPI cases are compiled as the
# user's programs are.
bash scripts/install-deps.sh  # (ccache among them, before it is looked for)
cache=()
if command -v ccache >/dev/null; then
  export CCACHE_NOHASHDIR=1
  cache=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

echo "== build (RelWithDebInfo${mpi:+, $mpi}) =="
BUILD_DIR=$build_dir bash scripts/build.sh -DATTRCHECK_BUILD_TESTS=ON -DATTRCHECK_BUILD_BENCH=ON "${cache[@]}"
# One test more than there are cores: a test spends part of its time waiting for its MPI launcher
# to start the ranks (Open MPI 6.0's takes longest), time another test can use.
jobs=$(( $(nproc) + 1 ))
select=()
[ "${ATTRCHECK_SKIP_SCRIPTS:-0}" = 1 ] && select=(-LE scripts)
if [ $sanitizers = 0 ]; then
  echo "== tests (${mpi:-default MPI}${select:+, without the label scripts}) =="
  ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "${select[@]}"
  exit 0
fi

echo "== UndefinedBehaviorSanitizer build of everything =="
ATTRCHECK_MPI= BUILD_DIR=build-ubsan bash scripts/build.sh -DATTRCHECK_SANITIZE=undefined -DATTRCHECK_BUILD_BENCH=OFF \
  "${cache[@]}"
if [ -n "$mpi" ]; then  # (the sanitizer builds are of the default MPI, this one is not)
  echo "== tests ($mpi${select:+, without the label scripts}) =="
  ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "${select[@]}"
else
  # The normal build's tests that the UndefinedBehaviorSanitizer build has not, by name.
  tests_of() { ctest --test-dir "$1" -N | sed -n 's/^ *Test *#[0-9]*: \(.*\)$/\1/p' | LC_ALL=C sort; }
  only_normal=$(LC_ALL=C comm -23 <(tests_of "$build_dir") <(tests_of build-ubsan) |
                sed 's/[]\\.*+?^$(){}|[]/\\&/g' | paste -sd '|')
  echo "== tests (default MPI) that only the normal build has: the others run in its sanitizer build =="
  if [ -n "$only_normal" ]; then
    ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" -R "^($only_normal)\$"
  fi
fi

echo "== ThreadSanitizer build of the engine, the findings store and their tests =="
ATTRCHECK_MPI= BUILD_DIR=build-tsan bash scripts/build.sh -DATTRCHECK_SANITIZE=thread -DATTRCHECK_BUILD_BENCH=OFF \
  "${cache[@]}"
# halt_on_error: any race fails the run; second_deadlock_stack: full reports for lock cycles.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -L 'engine|report'

# libubsan is an ordinary dependency of the preloaded library, so this build runs everything: the
# runtime's hooks and trampolines under real mpirun, on garbage input and on real software. The
# programs under test are not instrumented (tests/CMakeLists.txt). halt_on_error: a rank that
# reaches undefined behaviour exits non-zero, and its test fails with the report on stderr.
echo "== UndefinedBehaviorSanitizer build, the whole suite =="
UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}" \
  ctest --test-dir build-ubsan --output-on-failure -j "$(nproc)"
