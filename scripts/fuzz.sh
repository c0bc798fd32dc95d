#!/usr/bin/env bash
# A long run of the differential random-program tester (tests/fuzz/fuzz.py) against one build.
#
#   N=200 M=60 RANKS=1,2 SEED=1 BUILD_DIR=build bash scripts/fuzz.sh [fuzz.py options...]
#
#   N          legal programs per rank count (default 200)
#   M          seeded-error programs per rank count (default 60; one rule each, in turn)
#   RANKS      rank counts, comma-separated (default 1,2)
#   SEED       first seed (default 1)
#   BUILD_DIR  the build to test (default build; build-mpich for MPICH)
#   JOBS       programs run at once (default 2)
#   AVOID      generator switches that leave out constructs of known bugs (tests/fuzz/program.py AVOIDABLE)
#   OUT        where programs, minimal programs and summary.json go (default BUILD_DIR/fuzz-out)
#
# Prints a summary (programs run, mismatches attributable to attrcheck, missed errors, library
# divergences with a minimal program for each class) and exits 1 on an attrcheck failure that
# tests/fuzz/known.py does not list (--strict: on known ones too), 2 if the tester itself failed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-build}"
case "$build" in /*) ;; *) build="$here/$build" ;; esac
for f in "$build/bin/attrcheck" "$build/lib/libattrcheck.so" "$build/lib/attrcheck/mpi-build.json"; do
  [ -e "$f" ] || { echo "fuzz.sh: $f missing: build first (scripts/build.sh)" >&2; exit 2; }
done
args=(--build "$build" --legal "${N:-200}" --seeded "${M:-60}" --ranks "${RANKS:-1,2}" --seed "${SEED:-1}"
      --jobs "${JOBS:-2}")
[ -n "${AVOID:-}" ] && args+=(--avoid "$AVOID")
[ -n "${OUT:-}" ] && args+=(--out "$OUT")
exec python3 "$here/tests/fuzz/fuzz.py" "${args[@]}" "$@"
