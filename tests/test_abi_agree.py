#!/usr/bin/env python3
"""gen/abi_agree.py refuses standard ABI headers that disagree where attrcheck relies on them,
and only notes a difference elsewhere: run on small headers written here (every machine has a C
compiler; the real headers exist only where an MPI library ships the standard ABI)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "gen")
sys.path.insert(0, GEN)
import abi_agree  # noqa: E402


def header(constants, prototypes):
    lines = ["#include <stdint.h>", "typedef struct MPI_ABI_Comm* MPI_Comm;", "typedef intptr_t MPI_Aint;",
             "typedef int64_t MPI_Count;", "typedef int64_t MPI_Offset;", "typedef struct { int f[8]; } MPI_Status;"]
    for name in abi_agree.CONSTANTS:
        if not name.startswith("sizeof"):
            lines.append(f"#define {name} {constants.get(name, 1)}")
    lines += prototypes
    return "\n".join(lines) + "\n"


def agree(first, second):
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, text in enumerate((first, second)):
            os.makedirs(os.path.join(tmp, str(i)))
            paths.append(os.path.join(tmp, str(i), "mpi.h"))
            with open(paths[-1], "w") as f:
                f.write(text)
        spec = os.path.join(tmp, "spec.json")
        with open(spec, "w") as f:
            f.write('{"functions": [{"name": "MPI_Comm_set_attr"}]}')
        sources = os.path.join(tmp, "src")
        os.makedirs(sources)
        with open(os.path.join(sources, "a.cpp"), "w") as f:
            f.write("PMPI_Comm_toint(c);\n")
        return subprocess.run([sys.executable, os.path.join(GEN, "abi_agree.py"), "--cc", "cc", "--spec", spec,
                               "--sources", sources, *paths], capture_output=True, text=True)


def main():
    problems = []
    protos = ["int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void *value);", "int MPI_Comm_toint(MPI_Comm comm);",
              "int MPI_Other(const char name[], int n);"]
    base = header({}, protos)
    cases = [
        ("the same header", base, 0, None),
        ("names and T[] / T* aside", header({}, [protos[0].replace("value", "v"), protos[1],
                                                 "int MPI_Other(const char *s, int count);"]), 0, None),
        ("a constant", header({"MPI_TAG_UB": 2}, protos), 1, "MPI_TAG_UB"),
        ("a wrapped function", header({}, ["int MPI_Comm_set_attr(MPI_Comm comm, long keyval, void *value);"] +
                                      protos[1:]), 1, "MPI_Comm_set_attr"),
        ("a function the runtime calls", header({}, [protos[0], "long MPI_Comm_toint(MPI_Comm comm);", protos[2]]), 1,
         "MPI_Comm_toint"),
        ("a function attrcheck does not rely on", header({}, protos[:2] + ["int MPI_Other(const char *s, long n);"]), 0,
         "note: the headers differ where attrcheck does not rely on them: MPI_Other"),
    ]
    for what, other, rc, said in cases:
        p = agree(base, other)
        out = p.stdout + p.stderr
        if p.returncode != rc or (said and said not in out):
            problems.append(f"{what}: exit {p.returncode} (expected {rc}), output:\n{out}")
    for p in problems:
        print(f"test_abi_agree: {p}", file=sys.stderr)
    print(f"test_abi_agree: {len(cases) - len(problems)} of {len(cases)} cases as expected")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
