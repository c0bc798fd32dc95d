"""The wrapper spec's functions (wrappers/mpi.json): checking them, their parameters and roles."""
import re

KINDS = {"comm": "Comm", "type": "Type", "win": "Win"}
POINTER_ROLES = {"object_out", "object_inout", "keyval_out", "keyval_inout", "value_out", "flag_out"}
OPS = {"create_keyval", "free_keyval", "set_attr", "get_attr", "delete_attr", "dup", "construct",
       "obtain", "free", "init", "finalize", "abort"}


class SpecError(Exception):
    pass


def parse_params(text, fn):
    """'MPI_Comm comm, int *flag' -> [('MPI_Comm comm', 'comm'), ('int *flag', 'flag')]."""
    text = text.strip()
    if text in ("", "void"):
        return []
    params = []
    for decl in text.split(","):
        decl = decl.strip()
        m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*(\[\s*\])?\s*$", decl)
        if not m:
            raise SpecError(f"{fn}: cannot parse parameter '{decl}'")
        params.append((decl, m.group(1)))
    return params


def check(fn):
    for key in ("name", "op", "params", "roles"):
        if key not in fn:
            raise SpecError(f"{fn.get('name', '?')}: missing '{key}'")
    if fn["op"] not in OPS:
        raise SpecError(f"{fn['name']}: unknown op '{fn['op']}'")
    if fn["op"] not in ("init", "finalize", "abort") and fn.get("kind") not in KINDS:
        raise SpecError(f"{fn['name']}: op {fn['op']} needs a kind (comm, type, win)")
    names = {n for _, n in parse_params(fn["params"], fn["name"])}
    for param, role in fn["roles"].items():
        if param not in names:
            raise SpecError(f"{fn['name']}: role for unknown parameter '{param}'")


def role_param(fn, role):
    for param, r in fn["roles"].items():
        if r == role:
            return param
    return None


def require(fn, role):
    p = role_param(fn, role)
    if p is None:
        raise SpecError(f"{fn['name']}: op {fn['op']} needs a parameter with role '{role}'")
    return p
