#!/usr/bin/env bash
# Runs every test: the normal build's ctest suite, then the engine suites again under
# ThreadSanitizer. Installs what it needs and builds first.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== build (RelWithDebInfo) =="
bash scripts/build.sh
echo "== tests =="
ctest --test-dir build --output-on-failure -j "$(nproc)"

echo "== ThreadSanitizer build of the engine and its tests =="
BUILD_DIR=build-tsan bash scripts/build.sh -DATTRCHECK_SANITIZE=thread -DATTRCHECK_BUILD_BENCH=OFF
# halt_on_error: any race fails the run; second_deadlock_stack: full reports for lock cycles.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
ctest --test-dir build-tsan --output-on-failure -j "$(nproc)" -L engine
