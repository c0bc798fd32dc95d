#!/usr/bin/env python3
"""Generates attrcheck's PMPI wrappers from the declarative spec in wrappers/mpi.json.

Every intercepted MPI function becomes an `extern "C"` definition that
  1. passes straight to PMPI when the tool is off (mode=off, or not initialised for the op),
  2. null-checks its pointer parameters (rule arg.null),
  3. calls the one hand-written hook of its op (src/runtime/hooks.cpp) with the checked values
     and lambdas that forward to PMPI (and, for dup, undo a successful PMPI dup).

Usage: gen_wrappers.py SPEC OUT.cpp [--mpi-header PATH]
With --mpi-header, functions marked "optional" that the header does not declare are skipped
(e.g. MPI_Comm_idup_with_info, which Open MPI 4.1 does not have).
"""
import argparse
import json
import re
import sys

KINDS = {"comm": "Comm", "type": "Type", "win": "Win"}
NULL_HANDLE = {"comm": "MPI_COMM_NULL", "type": "MPI_DATATYPE_NULL", "win": "MPI_WIN_NULL"}
FREE_FN = {"comm": "PMPI_Comm_free", "type": "PMPI_Type_free", "win": "PMPI_Win_free"}
POINTER_ROLES = {"object_out", "object_inout", "keyval_out", "keyval_inout", "value_out", "flag_out"}
OPS = {"create_keyval", "free_keyval", "set_attr", "get_attr", "delete_attr", "dup", "construct",
       "free", "init", "finalize", "abort"}


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


def body(fn):
    name, op, kind = fn["name"], fn["op"], fn.get("kind")
    params = parse_params(fn["params"], name)
    args = ", ".join(n for _, n in params)
    pmpi = f"P{name}({args})"
    lines = []
    k = f"attrcheck::ObjectKind::{KINDS[kind]}" if kind else "attrcheck::ObjectKind::Comm"
    repl = f'"{fn["deprecated"]}"' if fn.get("deprecated") else "nullptr"
    lines.append(f'  static const rt::Api api{{"{name}", {k}, {repl}}};')
    lines.append(f"  if (!rt::active(rt::Op::{op_enum(op)})) return {pmpi};")
    lines.append("  const rt::Call call{&api, __builtin_return_address(0)};")
    for param, role in fn["roles"].items():
        if role in POINTER_ROLES:
            lines.append(f'  if ({param} == nullptr) return rt::on_null_arg(call, "{param}");')

    if op == "create_keyval":
        c, d = require(fn, "copy_fn"), require(fn, "delete_fn")
        kv, ex = require(fn, "keyval_out"), require(fn, "extra_state")
        ctype = next(t for t, n in params if n == c).rsplit(c, 1)[0].strip()
        dtype = next(t for t, n in params if n == d).rsplit(d, 1)[0].strip()
        lines.append(
            f"  return rt::on_create_keyval(call, reinterpret_cast<void*>({c}), reinterpret_cast<void*>({d}), {kv},\n"
            f"      reinterpret_cast<std::uintptr_t>({ex}),\n"
            f"      [&](void* copy_, void* delete_, std::uint64_t extra_) {{\n"
            f"        return P{name}(reinterpret_cast<{ctype}>(copy_), reinterpret_cast<{dtype}>(delete_), {kv},\n"
            f"                       reinterpret_cast<void*>(static_cast<std::uintptr_t>(extra_)));\n"
            f"      }});")
    elif op == "free_keyval":
        kv = require(fn, "keyval_inout")
        lines.append(f"  return rt::on_free_keyval(call, {kv}, [&]() {{ return {pmpi}; }});")
    elif op == "set_attr":
        o, kv, v = require(fn, "object"), require(fn, "keyval"), require(fn, "value")
        lines.append(f"  return rt::on_set_attr(call, rt::handle({o}), {kv}, reinterpret_cast<std::uintptr_t>({v}),\n"
                     f"                         [&]() {{ return {pmpi}; }});")
    elif op == "get_attr":
        o, kv = require(fn, "object"), require(fn, "keyval")
        v, f = require(fn, "value_out"), require(fn, "flag_out")
        lines.append(f"  return rt::on_get_attr(call, rt::handle({o}), {kv}, {v}, {f}, [&]() {{ return {pmpi}; }});")
    elif op == "delete_attr":
        o, kv = require(fn, "object"), require(fn, "keyval")
        lines.append(f"  return rt::on_delete_attr(call, rt::handle({o}), {kv}, [&]() {{ return {pmpi}; }});")
    elif op == "dup":
        o, out = require(fn, "object"), require(fn, "object_out")
        req = role_param(fn, "request")
        wait = f"PMPI_Wait({req}, MPI_STATUS_IGNORE); " if req else ""
        lines.append(
            f"  return rt::on_dup(call, rt::handle({o}),\n"
            f"      [&](attrcheck::Handle* new_) {{\n"
            f"        const int rc_ = {pmpi};\n"
            f"        if (rc_ == MPI_SUCCESS) *new_ = rt::handle(*{out});\n"
            f"        return rc_;\n"
            f"      }},\n"
            f"      [&]() {{ {wait}{FREE_FN[kind]}({out}); *{out} = {NULL_HANDLE[kind]}; }});")
    elif op == "construct":
        out = require(fn, "object_out")
        lines.append(
            f"  return rt::on_construct(call, [&](attrcheck::Handle* new_) {{\n"
            f"    const int rc_ = {pmpi};\n"
            f"    *new_ = rc_ == MPI_SUCCESS ? rt::handle(*{out}) : rt::handle({NULL_HANDLE[kind]});\n"
            f"    return rc_;\n"
            f"  }});")
    elif op == "free":
        o = require(fn, "object_inout")
        lines.append(f"  return rt::on_free(call, rt::handle(*{o}), [&]() {{ return {pmpi}; }});")
    elif op == "init":
        prov = role_param(fn, "provided_out")
        if prov:
            lines.append(f"  return rt::on_init(call, required, [&](int* provided_) {{\n"
                         f"    const int rc_ = {pmpi};\n"
                         f"    *provided_ = rc_ == MPI_SUCCESS ? *{prov} : MPI_THREAD_SINGLE;\n"
                         f"    return rc_;\n"
                         f"  }});")
        else:
            lines.append(f"  return rt::on_init(call, MPI_THREAD_SINGLE, [&](int* provided_) {{\n"
                         f"    const int rc_ = {pmpi};\n"
                         f"    *provided_ = MPI_THREAD_SINGLE;\n"
                         f"    return rc_;\n"
                         f"  }});")
    elif op == "finalize":
        lines.append(f"  return rt::on_finalize(call, [&]() {{ return {pmpi}; }});")
    elif op == "abort":
        lines.append(f"  return rt::on_abort(call, rt::handle(comm), errorcode, [&]() {{ return {pmpi}; }});")
    return lines


F2C = {"comm": "PMPI_Comm_f2c", "type": "PMPI_Type_f2c", "win": "PMPI_Win_f2c"}
C2F = {"comm": "PMPI_Comm_c2f", "type": "PMPI_Type_c2f", "win": "PMPI_Win_c2f"}
BINDINGS = {"aint": "attrcheck::Binding::FortranAint", "int": "attrcheck::Binding::FortranInt"}


def fortran_body(fn):
    """A Fortran entry point: everything by reference, the error code in ierr."""
    name, op, kind, sym = fn["name"], fn["op"], fn.get("kind"), fn["symbol"]
    params = parse_params(fn["params"], name)
    if fn.get("binding") not in BINDINGS:
        raise SpecError(f"{sym}: binding must be 'aint' or 'int'")
    types = ", ".join(decl.rsplit(n, 1)[0].strip() for decl, n in params)
    args = ", ".join(n for _, n in params)
    ierr = require(fn, "ierr")
    k = f"attrcheck::ObjectKind::{KINDS[kind]}" if kind else "attrcheck::ObjectKind::Comm"
    repl = f'"{fn["deprecated"]}"' if fn.get("deprecated") else "nullptr"
    lines = [
        f'  static const rt::Api api{{"{name}", {k}, {repl}, {BINDINGS[fn["binding"]]}}};',
        f'  static const auto pmpi = reinterpret_cast<void (*)({types})>(rt::fortran_pmpi("p{sym}"));',
        f"  if (!pmpi) {{ *{ierr} = MPI_ERR_INTERN; return; }}",
        f"  if (!rt::active(rt::Op::{op_enum(op)})) {{ pmpi({args}); return; }}",
        "  const rt::Call call{&api, __builtin_return_address(0)};",
    ]
    fwd = f"[&]() {{ pmpi({args}); return static_cast<int>(*{ierr}); }}"

    def obj(p):
        return f"rt::handle({F2C[kind]}(*{p}))"

    if op == "create_keyval":
        c, d = require(fn, "copy_fn"), require(fn, "delete_fn")
        kv, ex = require(fn, "keyval_out"), require(fn, "extra_state")
        ex_type = next(decl for decl, n in params if n == ex).rsplit(ex, 1)[0].replace("*", "").strip()
        lines.append(
            f"  *{ierr} = rt::on_create_keyval(call, {c}, {d}, {kv}, static_cast<std::uint64_t>(static_cast<std::int64_t>(*{ex})),\n"
            f"      [&](void* copy_, void* delete_, std::uint64_t extra_) {{\n"
            f"        {ex_type} e_ = static_cast<{ex_type}>(extra_);\n"
            f"        pmpi(copy_, delete_, {kv}, &e_, {ierr});\n"
            f"        return static_cast<int>(*{ierr});\n"
            f"      }});")
    elif op == "free_keyval":
        lines.append(f"  *{ierr} = rt::on_free_keyval(call, {require(fn, 'keyval_inout')}, {fwd});")
    elif op == "set_attr":
        o, kv, v = require(fn, "object"), require(fn, "keyval"), require(fn, "value")
        lines.append(f"  *{ierr} = rt::on_set_attr(call, {obj(o)}, *{kv},\n"
                     f"      static_cast<std::uint64_t>(static_cast<std::int64_t>(*{v})), {fwd});")
    elif op == "get_attr":
        o, kv = require(fn, "object"), require(fn, "keyval")
        v, fl = require(fn, "value_out"), require(fn, "flag_out")
        lines.append(f"  *{ierr} = rt::on_get_attr(call, {obj(o)}, *{kv}, {v}, {fl}, {fwd});")
    elif op == "delete_attr":
        o, kv = require(fn, "object"), require(fn, "keyval")
        lines.append(f"  *{ierr} = rt::on_delete_attr(call, {obj(o)}, *{kv}, {fwd});")
    elif op == "dup":
        o, out = require(fn, "object"), require(fn, "object_out")
        ctype = {"comm": "MPI_Comm", "type": "MPI_Datatype", "win": "MPI_Win"}[kind]
        lines.append(
            f"  *{ierr} = rt::on_dup(call, {obj(o)},\n"
            f"      [&](attrcheck::Handle* new_) {{\n"
            f"        pmpi({args});\n"
            f"        if (*{ierr} == MPI_SUCCESS) *new_ = {obj(out)};\n"
            f"        return static_cast<int>(*{ierr});\n"
            f"      }},\n"
            f"      [&]() {{ {ctype} c_ = {F2C[kind]}(*{out}); {FREE_FN[kind]}(&c_); *{out} = {C2F[kind]}({NULL_HANDLE[kind]}); }});")
    elif op == "free":
        lines.append(f"  *{ierr} = rt::on_free(call, {obj(require(fn, 'object_inout'))}, {fwd});")
    elif op == "init":
        prov = role_param(fn, "provided_out")
        set_prov = f"*provided_ = *{ierr} == MPI_SUCCESS ? *{prov} : MPI_THREAD_SINGLE;" if prov \
            else "*provided_ = MPI_THREAD_SINGLE;"
        lines.append(f"  *{ierr} = rt::on_init(call, MPI_THREAD_SINGLE, [&](int* provided_) {{\n"
                     f"    pmpi({args});\n"
                     f"    {set_prov}\n"
                     f"    return static_cast<int>(*{ierr});\n"
                     f"  }});")
    elif op == "finalize":
        lines.append(f"  *{ierr} = rt::on_finalize(call, {fwd});")
    elif op == "abort":
        lines.append(f"  *{ierr} = rt::on_abort(call, rt::handle(PMPI_Comm_f2c(*comm)), *errorcode, {fwd});")
    else:
        raise SpecError(f"{sym}: op {op} has no Fortran form")
    return lines


def op_enum(op):
    return "".join(part.capitalize() for part in op.split("_"))


def generate(spec, declared):
    out = [
        "// Generated by gen/gen_wrappers.py from wrappers/mpi.json. Do not edit.",
        '#include "runtime/hooks.hpp"',
        "",
        "namespace rt = attrcheck::rt;",
        "",
    ]
    count = 0
    for fn in spec["functions"]:
        check(fn)
        if fn.get("optional") and declared is not None and fn["name"] not in declared:
            out.append(f"// {fn['name']}: not declared by this MPI library, not intercepted.")
            out.append("")
            continue
        params = fn["params"].strip() or "void"
        out.append(f'extern "C" ATTRCHECK_EXPORT int {fn["name"]}({params}) {{')
        out.extend(body(fn))
        out.append("}")
        out.append("")
        count += 1
    out.append("// ---- Fortran (mpif.h / use mpi) entry points ----")
    out.append("")
    out.append("static_assert(sizeof(MPI_Fint) == sizeof(int), \"keyvals and flags are passed as int*\");")
    out.append("")
    for fn in spec.get("fortran", []):
        for key in ("symbol", "name", "op", "params", "roles", "binding"):
            if key not in fn:
                raise SpecError(f"{fn.get('symbol', '?')}: missing '{key}'")
        if fn["op"] not in ("init", "finalize", "abort") and fn.get("kind") not in KINDS:
            raise SpecError(f"{fn['symbol']}: op {fn['op']} needs a kind")
        out.append(f'extern "C" ATTRCHECK_EXPORT void {fn["symbol"]}({fn["params"]}) {{')
        out.extend(fortran_body(fn))
        out.append("}")
        out.append("")
        count += 1
    out.append(f"// {count} wrappers.")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("out")
    ap.add_argument("--mpi-header")
    a = ap.parse_args(argv)
    with open(a.spec) as f:
        spec = json.load(f)
    declared = None
    if a.mpi_header:
        with open(a.mpi_header) as f:
            declared = set(re.findall(r"\bint\s+(MPI_[A-Za-z_]+)\s*\(", f.read()))
    try:
        text = generate(spec, declared)
    except SpecError as e:
        print(f"gen_wrappers: {a.spec}: {e}", file=sys.stderr)
        return 1
    with open(a.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
