#!/usr/bin/env python3
"""The runtime's Fortran wrappers match the MPI library it is built against: it exports a Fortran
entry point (mpi_X_, mpi_X_f08_ ...) only if the library's Fortran libraries define it and its
profiling twin (no dead wrapper, no wrapper of a symbol the library lacks), and for every C object
call the spec intercepts (dup, construct, obtain, free) it wraps each Fortran twin the library has.

usage: test_fortran_symbols.py NM LIBATTRCHECK SPEC 'FORTRAN_LIB;FORTRAN_LIB...'
"""
import json
import re
import subprocess
import sys


def defined(nm, path):
    out = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) >= 3}


def main(nm, lib, spec_path, fortran_libs):
    libs = [p for p in fortran_libs.split(";") if p]
    if not libs:
        print("no Fortran libraries: skipped")
        return 77
    theirs = set().union(*(defined(nm, p) for p in libs))
    ours = {s for s in defined(nm, lib) if re.fullmatch(r"mpix?_[a-z0-9_]+_", s)}
    failures = []
    for s in sorted(ours):
        family, _, stem = s.partition("_")  # mpi_X, or an extension's mpix_X
        twins = [f"p{family}_{stem}", f"p{family}r_{stem}"] if "_f08" in s else ["p" + s]
        if s not in theirs or not any(t in theirs for t in twins):
            failures.append(f"{s}: exported by attrcheck, but the library lacks it or its profiling twin")
    with open(spec_path) as f:
        spec = json.load(f)
    for fn in spec["functions"]:
        if fn["op"] not in ("dup", "construct", "obtain", "free"):
            continue
        base = fn["name"].lower()
        for s in (base + "_", base + "_f08_"):
            if s in theirs and s not in ours:
                failures.append(f"{s}: the library has {fn['name']}'s Fortran twin, attrcheck does not wrap it")
    print(f"{len(ours)} Fortran entry points wrapped, all defined by {', '.join(libs)}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
