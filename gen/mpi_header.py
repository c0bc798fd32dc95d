"""What an MPI library's C headers declare, read the way a C compiler reads them: mpi.h (and
Open MPI's mpi-ext.h, which declares its MPIX_ extensions, when it is there) run through the C
preprocessor, so that whatever mpi.h includes (MPICH's mpi_proto.h holds all its prototypes) and
whatever its configuration selects is seen; then every MPI_ / MPIX_ prototype is parsed.

Used by gen_wrappers.py (a function marked "optional" in the spec is generated only where the
header declares it) and by tests/test_handle_functions.py (every exported function that returns a
communicator, datatype or window handle is in the spec or excluded from it, with a reason).
"""
import os
import re
import subprocess

HANDLE_TYPES = ("MPI_Comm", "MPI_Datatype", "MPI_Win")
_NAME = re.compile(r"^(?:MPIX?)_[A-Za-z0-9_]+$")


def preprocess(cc, mpi_header):
    """mpi.h (and mpi-ext.h beside it, if any) through `cc -E`: the text a C program sees."""
    include = os.path.dirname(os.path.abspath(mpi_header))
    source = "#include <mpi.h>\n"
    if os.path.exists(os.path.join(include, "mpi-ext.h")):
        source += "#include <mpi-ext.h>\n"
    r = subprocess.run([cc, "-E", "-P", "-x", "c", "-I", include, "-"], input=source, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{cc} -E on {mpi_header}: {r.stderr.strip()[-2000:]}")
    return r.stdout


def _strip_balanced(text, keyword):
    """Removes every `keyword ( ... )` (balanced parentheses) from text."""
    out, i = [], 0
    pattern = re.compile(r"\b" + re.escape(keyword) + r"\s*\(")
    while True:
        m = pattern.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            j += 1
        i = j


def split_params(text):
    """A parameter list's top-level comma-separated declarations."""
    params, depth, cur = [], 0, []
    for ch in text:
        if ch == "," and depth == 0:
            params.append("".join(cur).strip())
            cur = []
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        cur.append(ch)
    last = "".join(cur).strip()
    if last and last != "void":
        params.append(last)
    return params


def prototypes(text):
    """{name: (return type, [parameter declarations])} for every MPI_ / MPIX_ function the text
    declares (PMPI_, QMPI_ and typedefs left out)."""
    for keyword in ("__attribute__", "__asm__", "__asm", "__declspec"):
        text = _strip_balanced(text, keyword)
    text = re.sub(r"\s+", " ", text)
    protos = {}
    for stmt in re.split(r"[;{}]", text):
        m = re.fullmatch(r"\s*(?:extern\s+(?:\"C\"\s+)?)?([A-Za-z_][\w\s\*]*?)\s*\b(MPIX?_\w+)\s*\((.*)\)\s*", stmt)
        if not m or "typedef" in m.group(1) or not _NAME.match(m.group(2)):
            continue
        protos[m.group(2)] = (m.group(1).strip(), split_params(m.group(3)))
    return protos


def handle_out(decl):
    """The handle type a parameter declaration returns a handle through (MPI_Comm *x, MPI_Datatype
    x[]: not const), or None."""
    if re.search(r"\bconst\b", decl):
        return None
    m = re.fullmatch(r"\s*(MPI_Comm|MPI_Datatype|MPI_Win)\s*(?:\*\s*[A-Za-z_]\w*|\*|[A-Za-z_]\w*\s*\[\s*\w*\s*\])\s*", decl)
    return m.group(1) if m else None


def handle_returning(protos):
    """{name: how} for the functions that return a communicator, datatype or window handle: `how`
    names the out-parameters ("MPI_Comm *newcomm") or says "returns MPI_Comm" (by value)."""
    out = {}
    for name, (ret, params) in protos.items():
        outs = [p for p in params if handle_out(p)]
        if outs:
            out[name] = ", ".join(outs)
        elif ret in HANDLE_TYPES:
            out[name] = f"returns {ret}"
    return out


def declared(cc, mpi_header):
    return prototypes(preprocess(cc, mpi_header))


def narrow_handles(text):
    """Whether the preprocessed header's handles are ints (MPICH's), narrower than the pointers of
    Open MPI's and of the standard ABI's."""
    return re.search(r"\btypedef\s+int\s+MPI_Comm\s*;", text) is not None
