#!/usr/bin/env python3
"""attrcheck sees every handle the library hands out: each function the MPI library exports that
returns a communicator, datatype or window handle (an MPI_Comm *, MPI_Datatype * or MPI_Win *
parameter that is not const, an array of them, or such a return value), as its headers declare it
(gen/mpi_header.py: mpi.h, and mpi-ext.h where there is one, through the C preprocessor), is
either intercepted (wrappers/mpi.json 'functions', and then exported by libattrcheck.so) or
listed in the spec's 'not_intercepted' with the reason. A call that returns a handle the tool
does not see would make a correct program's next call on that handle look like a use after free.

usage: test_handle_functions.py CC MPI_H NM 'MPI_C_LIB;...' LIBATTRCHECK SPEC
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gen"))
import mpi_header  # noqa: E402


def defined(nm, path):
    out = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if len(line.split()) >= 3}


def main(cc, mpi_h, nm, libs, attrcheck, spec_path):
    libs = [p for p in libs.split(";") if p]
    exported = set().union(*(defined(nm, p) for p in libs))
    ours = defined(nm, attrcheck)
    with open(spec_path) as f:
        spec = json.load(f)
    wrapped = {fn["name"]: fn for fn in spec["functions"]}
    excluded = spec.get("not_intercepted", {})
    returning = mpi_header.handle_returning(mpi_header.declared(cc, mpi_h))
    failures = []
    for name in sorted(set(wrapped) & set(excluded)):
        failures.append(f"{name}: both intercepted and in not_intercepted")
    shown = 0
    for name, how in sorted(returning.items()):
        if name not in exported:
            continue  # declared, not exported: no program can call it
        shown += 1
        if name in wrapped:
            if name not in ours:
                failures.append(f"{name} ({how}): in the spec, but libattrcheck.so does not export a wrapper")
                continue
            print(f"  wrapped   {name:36} {wrapped[name]['op']:9} {how}")
        elif name in excluded:
            print(f"  excluded  {name:36} {'':9} {how}")
        else:
            failures.append(f"{name} ({how}): the library exports it, attrcheck neither intercepts it nor "
                            "lists it in wrappers/mpi.json's not_intercepted")
    print(f"{shown} exported functions return a communicator, datatype or window handle ({', '.join(libs)})")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
