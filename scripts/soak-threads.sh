#!/usr/bin/env bash
# Thread soak: the churn program (tests/mpi/cases/thread_churn.c: 2 ranks x 8 threads x 200
# rounds of keyval, communicator and datatype churn with attributes at MPI_THREAD_MULTIPLE) run
# RUNS times per library and mode under attrcheck, counting broken runs and findings
# (tests/soak_threads.py). Run it before calling a change to the fast paths, the pending sets, the
# keyval quarantine or object tracking done. Builds what is missing first (build/, build-mpich/).
#   RUNS=200 bash scripts/soak-threads.sh            # both libraries, shadow and emulate
#   LIBRARIES=mpich MODES=shadow RUNS=50 bash scripts/soak-threads.sh
#   bash scripts/soak-threads.sh --standard-abi      # the program built for the MPI standard
#                                                    # ABI, on each library's libmpi_abi
# THREADS, ROUNDS and NP change the program's size (RUNS=1 THREADS=2 ROUNDS=5: the suite's smoke
# test); BUILD_DIR is the build of the one library in LIBRARIES. Exits non-zero if any run broke
# or drew a finding at warning or error.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for lib in ${LIBRARIES:-openmpi mpich}; do
  if [ "$lib" = openmpi ]; then build=${BUILD_DIR:-build}; mpi=; else build=${BUILD_DIR:-build-$lib}; mpi=$lib; fi
  if [ ! -x "$build/tests/mpi/case_thread_churn" ] || [ ! -x "$build/bin/attrcheck" ]; then
    ATTRCHECK_MPI=$mpi BUILD_DIR=$build bash scripts/build.sh >/dev/null
  fi
  python3 tests/soak_threads.py --build "$build" --runs "${RUNS:-200}" --threads "${THREADS:-8}" \
    --rounds "${ROUNDS:-200}" --np "${NP:-2}" --modes "${MODES:-shadow,emulate}" "$@" || status=1
done
exit $status
