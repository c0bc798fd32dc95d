#!/usr/bin/env bash
# Installs what attrcheck needs on a fresh Debian machine (Debian 12, 13 or unstable), as root.
#   install-deps.sh          everything: to build, test and benchmark (the test command's)
#   install-deps.sh --demo   only what building attrcheck and running the demo needs: the
#                            compilers, CMake, Ninja, one MPI library (ATTRCHECK_MPI=mpich: MPICH,
#                            else Open MPI) and the libraries the tool itself links
# Packages are chosen by what the distribution has, not pinned: where Debian versions a package
# in its name (PETSc), the newest one the archive offers is taken. Idempotent: packages already
# present are skipped, so it is cheap to run before every build. A package a test's software
# comes in that the archive does not have (ScaLAPACK's test drivers, scalapack-mpi-test, are not
# in Debian unstable) is left out, saying so: the tests that need it are then skipped, saying so.
set -euo pipefail

demo=0
[ "${1:-}" = --demo ] && demo=1

# The newest `PREFIX<version>SUFFIX` the archive has (PETSc's libpetsc-real3.18-dev on Debian 12,
# libpetsc-real3.22-dev on Debian 13), or nothing.
newest() {
  apt-cache pkgnames "$1" 2>/dev/null | grep -E "^$1[0-9][0-9.]*$2\$" | sort -V | tail -n 1
}

# A fresh root has no package lists yet: without them nothing can be looked up or installed.
if [ "$(id -u)" -eq 0 ] && [ -z "$(apt-cache pkgnames cmake 2>/dev/null | head -n 1)" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get update -q
fi

if [ "${ATTRCHECK_MPI:-}" = mpich ] && [ $demo = 1 ]; then
  mpi=(mpich libmpich-dev)
elif [ $demo = 1 ]; then
  mpi=(libopenmpi-dev openmpi-bin)
else
  # Both: Debian's alternatives keep Open MPI the default mpicc / mpirun (priority 50 against
  # MPICH's 40); MPICH is mpicc.mpich, mpiexec.mpich (ATTRCHECK_MPI=mpich).
  mpi=(libopenmpi-dev openmpi-bin mpich libmpich-dev)
fi

packages=(
  build-essential cmake ninja-build pkg-config python3 gfortran binutils "${mpi[@]}"
  # Boost.Stacktrace's libbacktrace backend names a report's frames in the rank at MPI_Finalize
  # (header-only, over GCC's libbacktrace.a, which build-essential brings).
  libboost-stacktrace-dev nlohmann-json3-dev libcli11-dev
  libunwind8  # provenance stacks: dlopen'ed for unw_backtrace (src/engine/provenance.cpp)
)
if [ $demo = 0 ]; then
  petsc=$(newest libpetsc-real -dev)
  petsc_examples=$(newest libpetsc -dev-examples)
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev python3-jsonschema
    ccache  # the test command's builds share their MPI-independent objects (scripts/test.sh)
    valgrind  # scripts/bench-callgrind.sh counts instructions per call with callgrind
    valgrind-mpi  # valgrind's MPI wrapper, stacked with attrcheck by the tests (tests/stacking)
    chromium  # the HTML report's test opens it headless
    # The real-client tests (tests/real): PETSc and its tutorials, parallel HDF5 (Open MPI
    # flavour, and MPICH's: Debian builds it for both) and its examples (ph5example.c), mpi4py
    # with numpy, h5py built with MPI (python3-h5py-mpi only recommends python3-h5py, which
    # provides h5py.File), ScaLAPACK's test drivers for both libraries (their .dat inputs come
    # with scalapack-test-common, which it depends on).
    ${petsc:-libpetsc-real-dev} ${petsc_examples:-}
    libhdf5-openmpi-dev libhdf5-mpich-dev libhdf5-doc
    python3-mpi4py python3-numpy python3-h5py-mpi python3-h5py
    # The Python's own headers, the internal ones too: the suite checks the row attrcheck reads
    # its frames by without the GIL against them (tests/test_python_offsets.py).
    python3-dev
  )

  # Optional: installed where the archive has it.
  for p in scalapack-mpi-test; do
    if [ -n "$(apt-cache show --no-all-versions "$p" 2>/dev/null | head -n 1)" ]; then
      packages+=("$p")
    else
      echo "install-deps: the archive has no $p: the tests that need it will be skipped" >&2
    fi
  done
fi

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
