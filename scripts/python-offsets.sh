#!/usr/bin/env bash
# Prints the RawFrames row of src/runtime/python/python_profile.hpp for this machine's python3
# (its python3-dev headers, the internal ones included): how its thread states, interpreter
# frames, code objects and str objects are laid out. Run it in a Debian root to check a version's
# row: bash scripts/in-debian.sh trixie bash scripts/python-offsets.sh
set -euo pipefail
cd "$(dirname "$0")"
py=${PYTHON:-python3}
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cc -I"$inc" -o "$out" python_offsets.c
"$out"
