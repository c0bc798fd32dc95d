#!/usr/bin/env bash
# The main job. Until the PMPI runtime lands this is the engine benchmark: it builds, then prints
# per-operation times of the cache engine (get, set+delete, dup of 64 attributes, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >&2
exec ./build/bench/engine_bench --benchmark_min_time=0.2 "$@"
