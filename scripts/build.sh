#!/usr/bin/env bash
# Installs the dependencies (Debian packages) and builds attrcheck into build/ (or $BUILD_DIR).
# Extra arguments go to the CMake configure step, e.g. -DATTRCHECK_SANITIZE=thread.
# ATTRCHECK_DEPS=demo installs only what the build and the demo need (install-deps.sh --demo).
# ATTRCHECK_MPI=mpich (or openmpi) builds against that MPI library's compilers and launcher
# instead of the system default, into build-mpich/ (build-openmpi/) unless BUILD_DIR says.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh ${ATTRCHECK_DEPS:+--$ATTRCHECK_DEPS}
mpi=${ATTRCHECK_MPI:-}
build_dir=${BUILD_DIR:-build${mpi:+-$mpi}}
cmake -S . -B "$build_dir" -G Ninja -DATTRCHECK_MPI="$mpi" "$@"
cmake --build "$build_dir" -j "$(nproc)"
