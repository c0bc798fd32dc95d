#!/usr/bin/env python3
"""Checks that the standard ABI's mpi.h of every MPI library here agree where attrcheck's standard
ABI build relies on them: one build serves every library of the ABI only if their headers
declare the same functions the same way and give the constants the same values.

Usage: abi_agree.py --cc CC --spec wrappers/mpi.json --sources src/runtime HEADER [HEADER ...]
(exit 1 and the differences if they disagree where attrcheck relies on them)

Compared: every function two of them declare (parameter and result types, names aside: T[] is
T*), and the values of the constants the runtime uses (handles, keyvals, callbacks, error
classes, sizes), as a C program compiled against each header prints them. A difference is fatal
in a function attrcheck relies on (one the spec wraps, or one the runtime's sources call as
PMPI_X) or in a constant; elsewhere it is printed as a note. A function only some declare (Open MPI's
copy leaves the MPI-1 caching calls and c2f / f2c out, MPICH's has them) is listed, not refused:
the wrappers forward to it where the library in use has it (gen_wrappers.py --standard-abi).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpi_header  # noqa: E402

# The constants attrcheck's runtime and its checks depend on, as C expressions.
CONSTANTS = """
MPI_COMM_NULL MPI_COMM_WORLD MPI_COMM_SELF MPI_WIN_NULL MPI_DATATYPE_NULL MPI_INT MPI_ERRHANDLER_NULL
MPI_ERRORS_RETURN MPI_ERRORS_ARE_FATAL MPI_INFO_NULL MPI_GROUP_NULL
MPI_KEYVAL_INVALID MPI_TAG_UB MPI_HOST MPI_IO MPI_WTIME_IS_GLOBAL MPI_APPNUM MPI_LASTUSEDCODE MPI_UNIVERSE_SIZE
MPI_WIN_BASE MPI_WIN_SIZE MPI_WIN_DISP_UNIT MPI_WIN_CREATE_FLAVOR MPI_WIN_MODEL
MPI_COMM_NULL_COPY_FN MPI_COMM_DUP_FN MPI_COMM_NULL_DELETE_FN MPI_TYPE_NULL_COPY_FN MPI_TYPE_DUP_FN
MPI_TYPE_NULL_DELETE_FN MPI_WIN_NULL_COPY_FN MPI_WIN_DUP_FN MPI_WIN_NULL_DELETE_FN
MPI_SUCCESS MPI_ERR_ARG MPI_ERR_COMM MPI_ERR_TYPE MPI_ERR_WIN MPI_ERR_KEYVAL MPI_ERR_OTHER MPI_ERR_INTERN
MPI_ERR_UNKNOWN MPI_ERR_LASTCODE MPI_THREAD_SINGLE MPI_THREAD_FUNNELED MPI_THREAD_SERIALIZED MPI_THREAD_MULTIPLE
MPI_COMBINER_NAMED MPI_COMBINER_DUP MPI_MAX_OBJECT_NAME MPI_MAX_LIBRARY_VERSION_STRING MPI_MAX_ERROR_STRING
sizeof(MPI_Status) sizeof(MPI_Comm) sizeof(MPI_Aint) sizeof(MPI_Count) sizeof(MPI_Offset)
""".split()


def param_type(decl):
    """A parameter declaration's type, its name dropped: "MPI_Comm *newcomm" -> "MPI_Comm*"."""
    d = re.sub(r"\s*\*\s*", "*", re.sub(r"\s+", " ", decl).strip())
    m = re.fullmatch(r"(.*?)\s*\b\w+\s*(\[[^\]]*\])", d)
    if m:
        return m.group(1) + "*"
    m = re.fullmatch(r"(.*[\w*])[ *]?\b(\w+)", d)
    if m and m.group(1).strip() not in ("const", "struct", "unsigned"):
        return (m.group(1) + ("*" if d[len(m.group(1))] == "*" else "")).strip()
    return d


def constants(cc, header):
    body = "\n".join(f'  printf("%s %lld\\n", "{c}", (long long)(intptr_t)({c}));' for c in CONSTANTS)
    src = f"#include <mpi.h>\n#include <stdint.h>\n#include <stdio.h>\nint main(void) {{\n{body}\n  return 0;\n}}\n"
    with tempfile.TemporaryDirectory() as tmp:
        c, exe = os.path.join(tmp, "c.c"), os.path.join(tmp, "c")
        with open(c, "w") as f:
            f.write(src)
        r = subprocess.run([cc, "-w", "-I", os.path.dirname(os.path.abspath(header)), c, "-o", exe],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{header}: the constants do not compile: {r.stderr.strip()[-1500:]}")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--sources", required=True)
    ap.add_argument("headers", nargs="+")
    a = ap.parse_args(argv)
    import json
    with open(a.spec) as f:
        relied = {fn["name"] for fn in json.load(f)["functions"]}
    for top, _, files in os.walk(a.sources):
        for name in files:
            with open(os.path.join(top, name), errors="replace") as f:
                relied |= {"MPI_" + m for m in re.findall(r"\bPMPI_(\w+)", f.read())}
    protos = {h: mpi_header.prototypes(mpi_header.preprocess(a.cc, h)) for h in a.headers}
    values = {h: constants(a.cc, h) for h in a.headers}
    first, problems = a.headers[0], []
    for other in a.headers[1:]:
        for name in sorted(set(protos[first]) & set(protos[other])):
            (r1, p1), (r2, p2) = protos[first][name], protos[other][name]
            t1, t2 = [param_type(p) for p in p1], [param_type(p) for p in p2]
            if r1.replace(" ", "") != r2.replace(" ", "") or t1 != t2:
                what = f"{name}: {r1}({', '.join(t1)}) in {first}, {r2}({', '.join(t2)}) in {other}"
                if name in relied:
                    problems.append(what)
                else:
                    print(f"abi_agree: note: the headers differ where attrcheck does not rely on them: {what}")
        for c in CONSTANTS:
            if values[first][c] != values[other][c]:
                problems.append(f"{c}: {values[first][c]} in {first}, {values[other][c]} in {other}")
        only = sorted(set(protos[first]) ^ set(protos[other]))
        print(f"abi_agree: {len(set(protos[first]) & set(protos[other]))} functions and {len(CONSTANTS)} constants "
              f"compared; declared by one of them only: {', '.join(only) or 'none'}")
    for p in problems:
        print(f"abi_agree: the standard ABI headers disagree: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
