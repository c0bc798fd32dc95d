#!/usr/bin/env bash
# Installs everything attrcheck needs to build, test and benchmark on a fresh Debian machine.
# Idempotent: packages already present are skipped, so it is cheap to run before every build.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  libopenmpi-dev openmpi-bin gfortran
  libboost-stacktrace-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  binutils python3-jsonschema
  python3-mpi4py  # the default suppressions' test runs an mpi4py program
  chromium  # the HTML report's test opens it headless
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root (or install them with sudo apt-get install ${missing[*]})" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
