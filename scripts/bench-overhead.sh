#!/usr/bin/env bash
# docs/performance.md's overhead tables in one command. For each MPI build present (build/:
# Open MPI, build-mpich/: MPICH; scripts/build.sh and ATTRCHECK_MPI=mpich scripts/build.sh make
# them): instructions per call of every operation and keyval configuration, natively and under
# each mode (scripts/bench-callgrind.sh: machine-independent), and the same operations timed,
# interleaved (scripts/bench-mpi.sh); then the whole-program table on the real clients
# (scripts/bench-real.sh, on the first build: build/, Open MPI, by default). ROUNDS applies to the
# timed parts (default 5). SKIP="real mpi" leaves parts out (callgrind, mpi, real).
# BUILDS="build-mpich" measures those builds only (default "build build-mpich"); the scripts'
# own knobs pass through (COUNT, CLIENTS: COUNT=128 ROUNDS=1 THREADS=multiple CLIENTS="hdf5 true"
# is the suite's smoke test).
# Then, per build, shadow mode against native at the thread levels in THREADS (default
# "serialized multiple": the issue's targets are 1.3x through SERIALIZED, 1.5x at MULTIPLE),
# instructions per call (callgrind) and, unless SKIP has "mpi", time per call.
set -euo pipefail
cd "$(dirname "$0")/.."
export ROUNDS=${ROUNDS:-5}
skip=" ${SKIP:-} "
builds=(${BUILDS:-build build-mpich})
for build in "${builds[@]}"; do
  [ -x "$build/bench/mpi_attr_bench" ] || { echo "== $build: not built, skipped"; continue; }
  library=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("library") or "")' \
    "$build/lib/attrcheck/mpi-build.json" 2>/dev/null || true)
  if [[ $skip != *" callgrind "* ]]; then
    echo "== $build ${library}: instructions per call (callgrind)"
    BUILD_DIR=$build bash scripts/bench-callgrind.sh
  fi
  if [[ $skip != *" mpi "* ]]; then
    echo "== $build ${library}: time per call, $ROUNDS interleaved rounds"
    BUILD_DIR=$build bash scripts/bench-mpi.sh
  fi
  for level in ${THREADS-serialized multiple}; do
    if [[ $skip != *" callgrind "* ]]; then
      echo "== $build ${library}: MPI_THREAD_${level^^}: instructions per call (callgrind)"
      THREAD=$level CONFIGS="native shadow" BUILD_DIR=$build bash scripts/bench-callgrind.sh
    fi
    if [[ $skip != *" mpi "* ]]; then
      echo "== $build ${library}: MPI_THREAD_${level^^}: time per call, $ROUNDS interleaved rounds"
      THREAD=$level BUILD_DIR=$build bash scripts/bench-mpi.sh
    fi
  done
done
if [[ $skip != *" real "* ]]; then
  echo "== whole program (${builds[0]})"
  BUILD_DIR=${builds[0]} bash scripts/bench-real.sh
fi
