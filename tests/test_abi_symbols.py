#!/usr/bin/env python3
"""The standard ABI build binds strongly only to what every library of the ABI here defines: each
MPI symbol libattrcheck_abi.so needs is defined by every libmpi_abi the build was made for, or is a
weak reference (the MPI-1 caching calls, which Open MPI's libmpi_abi has not). A strong reference
to a symbol one library lacks would stop every program on that library at load time.

Usage: test_abi_symbols.py NM LIBATTRCHECK_ABI 'LIBMPI_ABI;LIBMPI_ABI'"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_config  # noqa: E402


def symbols(nm, lib, *flags):
    out = subprocess.run([nm, "-D", *flags, lib], capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines() if line.split()]


def main(nm, attrcheck_abi, libs):
    libs = [lib for lib in libs.split(";") if lib]
    defined = {lib: {row[-1] for row in symbols(nm, lib, "--defined-only")} for lib in libs}
    problems, weak = [], []
    for row in symbols(nm, attrcheck_abi, "--undefined-only"):
        kind, name = row[-2], row[-1]
        if not name.startswith(("MPI_", "PMPI_", "MPIX_", "PMPIX_")):
            continue
        lacking = [lib for lib in libs if name not in defined[lib]]
        if kind in ("w", "v"):
            weak.append(name)
        elif lacking:
            problems.append(f"{name}: a strong reference, and {', '.join(lacking)} does not define it")
    # The profile of each library's newest series (the one with a standard ABI library) says whether
    # it lacks the MPI-1 caching calls (the portability report's standard-abi-lacks-mpi1-calls).
    profiles = mpi_config.profiles()
    mpi1 = ("MPI_Keyval_create", "MPI_Keyval_free", "MPI_Attr_put", "MPI_Attr_get", "MPI_Attr_delete")
    for lib in libs:
        library = "mpich" if "mpich" in os.path.basename(lib) or "/mpich" in lib else "openmpi"
        lacks = all(name not in defined[lib] for name in mpi1)
        said = profiles[library]["standard-abi-lacks-mpi1-calls"]
        if lacks != said or (not lacks and any(name not in defined[lib] for name in mpi1)):
            problems.append(f"{lib}: defines the MPI-1 caching calls: {not lacks}; the profile "
                            f"{profiles[library]['id']} says it lacks them: {said}")
    for p in problems:
        print(f"test_abi_symbols: {p}", file=sys.stderr)
    print(f"test_abi_symbols: {len(libs)} libraries of the ABI; weak references: {', '.join(sorted(weak)) or 'none'}")
    return 1 if problems or not libs else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
