#!/usr/bin/env bash
# Installs everything attrcheck needs to build, test and benchmark on a fresh Debian machine.
# Idempotent: packages already present are skipped, so it is cheap to run before every build.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  libopenmpi-dev openmpi-bin gfortran
  # MPICH beside it (ATTRCHECK_MPI=mpich): Debian's alternatives keep Open MPI the default
  # mpicc / mpirun (priority 50 against MPICH's 40); MPICH is mpicc.mpich, mpiexec.mpich.
  mpich libmpich-dev
  # Boost.Stacktrace's libbacktrace backend names a report's frames in the rank at MPI_Finalize
  # (header-only, over GCC's libbacktrace.a from libgcc-12-dev, which build-essential brings).
  libboost-stacktrace-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  binutils python3-jsonschema
  libunwind8  # provenance stacks: dlopen'ed for unw_backtrace (src/engine/provenance.cpp)
  valgrind  # scripts/bench-callgrind.sh counts instructions per call with callgrind
  python3-mpi4py  # the default suppressions' test runs an mpi4py program
  chromium  # the HTML report's test opens it headless
  # The real-client tests (tests/real): PETSc 3.18 and its tutorials, parallel HDF5 (Open MPI
  # flavour) and its examples (ph5example.c), mpi4py with numpy, h5py built with MPI.
  libpetsc-real3.18-dev libpetsc3.18-dev-examples
  libhdf5-openmpi-dev libhdf5-doc
  # MPICH's real client: Debian builds parallel HDF5 for MPICH too (PETSc, mpi4py, h5py: Open MPI).
  libhdf5-mpich-dev
  # ScaLAPACK 2.2.1's test drivers, built for both libraries (their .dat inputs come with
  # scalapack-test-common, which it depends on).
  scalapack-mpi-test
  python3-mpi4py python3-numpy python3-h5py-mpi
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
