#!/usr/bin/env bash
# The PETSc sweep (README, "Tested on real software"): ~90 of PETSc's own examples (the PETSc the
# distribution has: 3.18 on Debian 12, 3.22 on Debian 13; every sys test and tutorial, a spread of
# vec, mat, ksp, snes, ts, tao and dm tutorials), each built against `pkg-config petsc` and run
# natively and under attrcheck in shadow and emulate mode at 1 and 2 ranks, compared by
# tests/real/run_real.py (exit status, each rank's stdout, no error or warning finding beyond
# tests/real/allow/petsc.txt). Prints one table; exit status 1 if any run differs.
# Needs scripts/install-deps.sh (PETSc and its examples) and an Open MPI build (scripts/build.sh).
#   BUILD_DIR   the attrcheck build (default build/)
#   SCRATCH     where the examples are built and run (default /tmp/attrcheck-sweep-petsc)
# Extra arguments go to tests/real/sweep_petsc.py: --only REGEX, --np 1, --modes shadow, --list.
# About 15-25 minutes on 2 cores (the runs are one at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
if [ ! -x "$build_dir/bin/attrcheck" ]; then
  echo "sweep-petsc: no attrcheck build in $build_dir (run scripts/build.sh first)" >&2
  exit 2
fi
exec python3 tests/real/sweep_petsc.py --build "$build_dir" --scratch "${SCRATCH:-/tmp/attrcheck-sweep-petsc}" "$@"
