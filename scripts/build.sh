#!/usr/bin/env bash
# Installs the dependencies (Debian packages) and builds attrcheck into build/ (or $BUILD_DIR).
# Extra arguments go to the CMake configure step, e.g. -DATTRCHECK_SANITIZE=thread.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja "$@"
cmake --build "$build_dir" -j "$(nproc)"
