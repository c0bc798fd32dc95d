#!/usr/bin/env python3
"""Generates attrcheck's PMPI wrappers from the declarative spec in wrappers/mpi.json.

Every intercepted MPI function becomes an `extern "C"` definition that
  1. passes straight to PMPI when the tool is off (mode=off, or not initialised for the op),
  2. null-checks its pointer parameters (rule arg.null),
  3. calls the one hand-written hook of its op (src/runtime/hooks.hpp; the hooks are in
     src/runtime/hooks/) with the checked values and lambdas that forward to PMPI (and, for dup,
     undo a successful PMPI dup).

Usage: gen_wrappers.py SPEC OUT.cpp [--mpi-header PATH [--cc CC] [--mpi-libs 'LIB;LIB']]
                       [--fortran-libs 'LIB;LIB' [--nm NM]]
With --mpi-header, functions marked "optional" that the header does not declare are skipped
(e.g. MPI_Comm_idup_with_info, which Open MPI 4.1 does not have; MPIX_Comm_shrink and the MPI-4.0
large-count constructors, which only MPICH has). With --cc the header is read as the compiler
reads it (gen/mpi_header.py: preprocessed, with whatever it includes: MPICH declares everything in
mpi_proto.h, Open MPI its extensions in mpi-ext.h); with --mpi-libs an optional function is
generated only if the library also exports its profiling twin (PMPI_X). With --fortran-libs, a Fortran
entry point is wrapped only if those libraries export it and its profiling twin (so a symbol
the library lacks becomes neither an undefined reference nor a dead wrapper).
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spec import KINDS, POINTER_ROLES, SpecError, check, parse_params, require, role_param  # noqa: E402
from split_wrappers import split_delete, split_get, split_set  # noqa: E402
import mpi_header  # noqa: E402

NULL_HANDLE = {"comm": "MPI_COMM_NULL", "type": "MPI_DATATYPE_NULL", "win": "MPI_WIN_NULL"}
# (attrcheck's own call, undoing a dup: to the library itself, which no tool sees.)
FREE_FN = {"comm": "ATTRCHECK_LIBRARY(PMPI_Comm_free)", "type": "ATTRCHECK_LIBRARY(PMPI_Type_free)",
           "win": "ATTRCHECK_LIBRARY(PMPI_Win_free)"}
# obtain: how the handles a call returns relate to the ones the user already holds.
RETURNS = {"alias": "Alias", "same": "Same", "new": "New"}


F2C = {"comm": "PMPI_Comm_f2c", "type": "PMPI_Type_f2c", "win": "PMPI_Win_f2c"}
C2F = {"comm": "PMPI_Comm_c2f", "type": "PMPI_Type_c2f", "win": "PMPI_Win_c2f"}
C_TYPE = {"comm": "MPI_Comm", "type": "MPI_Datatype", "win": "MPI_Win"}
BINDINGS = {"c": "attrcheck::Binding::C", "aint": "attrcheck::Binding::FortranAint",
            "int": "attrcheck::Binding::FortranInt"}


def next_hop(fn):
    """How a C wrapper passes its call on: rt::forward (runtime/process/chain.hpp) to its next hop
    (the generated chain table below), with its profiling twin for a call sent back."""
    return f"rt::forward<&P{fn['name']}>(rt::chain::next_{fn['name']}, \"P{fn['name']}\""


class C:
    """How a C wrapper spells things: arguments by value, the result returned, the call passed on
    to the next MPI_X in load order (a tool's, or the library's PMPI_X: runtime/process/chain.hpp)."""

    def __init__(self, fn, params):
        self.fn, self.params = fn, params
        self.args = ", ".join(n for _, n in params)
        self.call_pmpi = f"{next_hop(fn)}{', ' if self.args else ''}{self.args})"  # an int: the result
        self.caller = "__builtin_return_address(0)"  # where the call came from (split(): a parameter)

    def signature(self):
        return f'extern "C" ATTRCHECK_EXPORT int {self.fn["name"]}({self.fn["params"].strip() or "void"})'

    def prologue(self, api):
        lines = [api, f"  if (!rt::active(rt::Op::{op_enum(self.fn['op'])})) return {self.call_pmpi};",
                 call_line(self.fn, self.caller)]
        for param, role in self.fn["roles"].items():
            if role in POINTER_ROLES:
                lines.append(f'  if ({param} == nullptr) return rt::on_null_arg(call, "{param}", [&]() {{ return {self.call_pmpi}; }});')
        return lines

    def result(self, expr):
        return f"  return {expr};"

    def early_result(self, expr):  # a result inside an if
        return f"return {expr};"

    def handle(self, p, kind):  # an object argument
        return f"rt::handle({p})"

    def out_handle(self, p, kind):  # where an object handle is returned (or freed)
        return f"rt::handle(*{p})"

    def deref(self, p):
        return p

    def key(self, p):  # a keyval argument
        return p

    def elem_handle(self, p, i, kind):  # an element of an array of object handles
        return f"rt::handle({p}[{i}])"

    def array_length(self, fn):
        return fn["array_length"]

    def wait(self, req):  # completes a nonblocking dup's request
        return f"PMPI_Wait({req}, MPI_STATUS_IGNORE);"

    def word(self, p):
        return f"reinterpret_cast<std::uintptr_t>({p})"

    def keyval_forward(self, c, d, kv, ex):
        ctype = next(t for t, n in self.params if n == c).rsplit(c, 1)[0].strip()
        dtype = next(t for t, n in self.params if n == d).rsplit(d, 1)[0].strip()
        return (f"[&](void* copy_, void* delete_, std::uint64_t extra_) {{\n"
                f"        return {next_hop(self.fn)}, reinterpret_cast<{ctype}>(copy_), reinterpret_cast<{dtype}>(delete_), {kv},\n"
                f"                       reinterpret_cast<void*>(static_cast<std::uintptr_t>(extra_)));\n"
                f"      }}")


class Fortran(C):
    """How a Fortran (mpif.h) wrapper spells things: all by reference, the error code in ierr,
    handles converted from MPI_Fint, and the next hop (a tool's mpi_*_, else the library's pmpi_*_)
    looked up at first use."""

    def __init__(self, fn, params):
        super().__init__(fn, params)
        self.ierr = require(fn, "ierr")
        # (forward_fortran: the library's binding may enter through the C wrappers: process/thread_state.hpp)
        self.call_pmpi = f"({self.forward(self.args)}, static_cast<int>(*{self.ierr}))"

    def forward(self, args):  # a statement calling the library's profiling entry point
        return f"rt::forward_fortran(pmpi, {args})"

    def signature(self):
        return f'extern "C" ATTRCHECK_EXPORT void {self.fn["symbol"]}({self.fn["params"]})'

    def lookup(self):  # the next tool's entry point, or the library's profiling one
        return f'rt::fortran_next("{self.fn["symbol"]}", "p{self.fn["symbol"]}")'

    def prologue(self, api):
        types = ", ".join(decl.rsplit(n, 1)[0].strip() for decl, n in self.params)
        return [api,
                f'  static const auto pmpi = reinterpret_cast<void (*)({types})>({self.lookup()});',
                f"  if (!pmpi) {{ *{self.ierr} = MPI_ERR_INTERN; return; }}",
                f"  if (!rt::active(rt::Op::{op_enum(self.fn['op'])})) {{ pmpi({self.args}); return; }}",
                call_line(self.fn)]

    def result(self, expr):
        return f"  *{self.ierr} = {expr};"

    def early_result(self, expr):
        return f"{{ *{self.ierr} = {expr}; return; }}"

    def handle(self, p, kind):
        return f"rt::handle({F2C[kind]}(*{p}))"

    out_handle = handle

    def deref(self, p):
        return f"*{p}"

    def key(self, p):  # (the library's Fortran numbers for predefined keys: mpi_profile.hpp)
        return f"rt::c_keyval(*{p})"

    def elem_handle(self, p, i, kind):
        return f"rt::handle({F2C[kind]}({p}[{i}]))"

    def array_length(self, fn):
        if "fortran_array_length" not in fn:
            raise SpecError(f"{fn['name']}: an object_out_array needs 'fortran_array_length' for its Fortran twins")
        return fn["fortran_array_length"]

    def wait(self, req):
        return (f"MPI_Request r_ = PMPI_Request_f2c(*{req}); PMPI_Wait(&r_, MPI_STATUS_IGNORE); "
                f"*{req} = PMPI_Request_c2f(r_);")

    def word(self, p):
        return f"static_cast<std::uint64_t>(static_cast<std::int64_t>(*{p}))"

    def keyval_forward(self, c, d, kv, ex):
        ex_type = next(decl for decl, n in self.params if n == ex).rsplit(ex, 1)[0].replace("*", "").strip()
        return (f"[&](void* copy_, void* delete_, std::uint64_t extra_) {{\n"
                # The user's own variable when the value is the user's: MPICH keeps its address
                # and hands that to the callbacks (Open MPI copies the value).
                f"        {ex_type} e_ = static_cast<{ex_type}>(extra_);\n"
                f"        {self.forward(f'copy_, delete_, {kv}, e_ == *{ex} ? {ex} : &e_, {self.ierr}')};\n"
                f"        return static_cast<int>(*{self.ierr});\n"
                f"      }}")


class F08(Fortran):
    """How a `use mpi_f08` wrapper spells things: as mpif.h's (a TYPE(MPI_Comm) handle is a derived
    type holding one INTEGER, passed by reference: an MPI_Fint*; LOGICAL flags and ADDRESS_KIND
    values alike), but `ierror` is OPTIONAL (a null pointer when absent: the wrapper then works
    with its own), and the call goes straight to the library's profiling twin (the profile's
    f08_profiling_prefix): neither library's f08 bindings enter through the C or mpif.h ones."""

    def __init__(self, fn, params):
        super().__init__(fn, params)
        self.stem = fn["symbol"][len("mpi_"):]

    def forward(self, args):
        return f"pmpi({args})"

    def signature(self):
        ierr = self.ierr
        decls = [f"{d.rsplit(n, 1)[0].strip()} {n}_opt_" if n == ierr else d for d, n in self.params]
        return f'extern "C" ATTRCHECK_EXPORT void {self.fn["symbol"]}({", ".join(decls)})'

    def lookup(self):  # (an MPIX_ call's twin: Open MPI's pmpix_X_f08_, MPICH's pmpixr_X_f08_)
        if self.fn["symbol"].startswith("mpix_"):
            return f'rt::f08_pmpix("{self.fn["symbol"][len("mpix_"):]}")'
        return f'rt::f08_pmpi("{self.stem}")'

    def prologue(self, api):
        ierr = self.ierr
        return [f"  MPI_Fint {ierr}_buf_ = MPI_SUCCESS;  // ierror absent",
                f"  MPI_Fint* const {ierr} = {ierr}_opt_ ? {ierr}_opt_ : &{ierr}_buf_;"] + super().prologue(api)


# The object calls' Fortran twins are derived from their C entries: every C entry whose op makes,
# dups, obtains or frees a handle gets an mpif.h / `use mpi` twin (mpi_comm_split_) and a
# `use mpi_f08` one (mpi_comm_split_f08_), generated where the library exports them.
TWIN_OPS = ("dup", "construct", "obtain", "free")
# Other names a library gives the same binding of a call, with the same parameters: Open MPI's
# `use mpi` MPI_WIN_ALLOCATE(_SHARED) with a TYPE(C_PTR) baseptr (mpi_win_allocate_cptr_),
# MPICH's `use mpi_f08` calls with a TYPE(*), DIMENSION(..) buffer (mpi_win_create_f08ts_: the
# buffer is a descriptor's address, forwarded as it is). The wrappers of a library that exports
# none of a variant's symbols are not generated.
# And MPICH's `use mpi_f08` large-count constructors (MPI_Type_contiguous with an
# INTEGER(KIND=MPI_COUNT_KIND) count: mpi_type_contiguous_f08_large_), whose parameters are the
# same but for the kind of their counts, which the wrapper passes on untouched; only for the
# constructors (MPI_Type_get_contents' large-count form has more parameters).
FORTRAN_VARIANTS = ("", "_cptr")
F08_VARIANTS = ("_f08", "_f08ts", "_f08_large", "_f08ts_large")
LARGE_OPS = ("construct",)
F08_PROFILING_PREFIXES = ("pmpi_", "pmpir_")  # Open MPI's, MPICH's (mpi_profile.def)


def f08_profiling_twins(symbol):
    """The names a `use mpi_f08` entry point's profiling twin may have: pmpi_X_f08_ / pmpir_X_f08_
    for mpi_X_f08_, pmpix_X_f08_ / pmpixr_X_f08_ for an extension's mpix_X_f08_."""
    family, _, rest = symbol.partition("_")
    return [p.replace("pmpi", "p" + family, 1) + rest for p in F08_PROFILING_PREFIXES]


def fortran_param(decl, name):
    """A C parameter's Fortran form: everything by reference, handles and integers an MPI_Fint,
    CHARACTER arguments a char* with a hidden length (size_t, by value) after the last argument."""
    base = decl.rsplit(name, 1)[0].replace("const", "").replace("*", "").strip()
    if base == "char":
        return f"char *{name}", f"size_t {name}_len"
    if base in ("void", "MPI_Aint", "MPI_Offset", "MPI_Count"):
        return f"{base} *{name}", None
    return f"MPI_Fint *{name}", None


def fortran_twin(fn):
    """The mpif.h / `use mpi` entry of a C object call (see TWIN_OPS)."""
    decls, hidden = [], []
    for decl, name in parse_params(fn["params"], fn["name"]):
        if name == "ierr":
            raise SpecError(f"{fn['name']}: a parameter named ierr has no Fortran twin")
        d, length = fortran_param(decl, name)
        decls.append(d)
        hidden += [length] if length else []
    twin = {k: v for k, v in fn.items() if k not in ("params", "roles", "optional")}
    twin.update(symbol=fn["name"].lower() + "_", name=fn["name"].upper(), binding="aint",
                params=", ".join(decls + ["MPI_Fint *ierr"] + hidden), roles={**fn["roles"], "ierr": "ierr"})
    return twin


def fortran_entries(spec, symbols):
    """The mpif.h / `use mpi` wrappers: spec["fortran"], then the twins of the C object calls, each
    under every name in FORTRAN_VARIANTS the library exports with its profiling twin (p + name);
    without symbols (no library to ask), every entry under its own name."""
    listed = {fn["symbol"] for fn in spec.get("fortran", [])}
    twins = [fortran_twin(fn) for fn in spec["functions"] if fn["op"] in TWIN_OPS]
    for twin in twins:
        if twin["symbol"] in listed:
            raise SpecError(f"{twin['symbol']}: listed in 'fortran' and derived from {twin['name']}: list it once")
    out = []
    for fn in spec.get("fortran", []) + twins:
        for variant in FORTRAN_VARIANTS:
            symbol = fn["symbol"][:-1] + variant + "_"
            if symbols is None and variant or symbols is not None and not {symbol, "p" + symbol} <= symbols:
                continue
            out.append(dict(fn, symbol=symbol))
    return out


def f08_entries(spec, symbols):
    """The `use mpi_f08` twins of the mpif.h entries spec["fortran_f08"] names and of the C object
    calls, under every name in F08_VARIANTS the library exports with its profiling twin."""
    by_symbol = {fn["symbol"]: fn for fn in spec.get("fortran", [])}
    bases = []
    for symbol in spec.get("fortran_f08", []):
        if symbol not in by_symbol:
            raise SpecError(f"fortran_f08: {symbol} is not a Fortran entry")
        fn = by_symbol[symbol]
        if fn["binding"] != "aint" or fn.get("deprecated"):
            raise SpecError(f"fortran_f08: {symbol}: mpi_f08 has no INTEGER-valued or deprecated attribute calls")
        bases.append(fn)
    bases += [fortran_twin(fn) for fn in spec["functions"] if fn["op"] in TWIN_OPS]
    out = []
    for fn in bases:
        for variant in F08_VARIANTS:
            symbol = fn["symbol"][:-1] + variant + "_"
            if variant.endswith("_large") and fn["op"] not in LARGE_OPS:
                continue
            if symbols is None and variant != F08_VARIANTS[0] or symbols is not None and (
                    symbol not in symbols or not any(p in symbols for p in f08_profiling_twins(symbol))):
                continue
            out.append(dict(fn, symbol=symbol))
    return out


def library_symbols(nm, libraries):
    """The dynamic symbols the given libraries define (nm -D --defined-only)."""
    import subprocess
    symbols = set()
    for lib in libraries:
        r = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True)
        if r.returncode != 0:
            raise SpecError(f"{nm} -D {lib}: {r.stderr.strip()}")
        symbols.update(line.split()[-1] for line in r.stdout.splitlines() if len(line.split()) >= 3)
    return symbols


def api_init(fn):
    """The braced initialiser of the wrapper's rt::Api."""
    op, kind = fn["op"], fn.get("kind")
    k = f"attrcheck::ObjectKind::{KINDS[kind]}" if kind else "attrcheck::ObjectKind::Comm"
    repl = f'"{fn["deprecated"]}"' if fn.get("deprecated") else "nullptr"
    binding = BINDINGS[fn.get("binding", "c")]
    lifecycle = "true" if op in ("dup", "construct", "obtain", "free") else "false"
    return f'{{"{fn["name"]}", {k}, {repl}, {binding}, {lifecycle}}}'


def body(fn, lang, api_decl=None):
    """The wrapper's statements: the language's prologue, then the op's hook call. api_decl: how
    the body gets its `api` (default: a static of its own)."""
    op, kind = fn["op"], fn.get("kind")
    lines = lang.prologue(api_decl or f"  static const rt::Api api{api_init(fn)};")
    fwd = f"[&]() {{ return {lang.call_pmpi}; }}"
    ret = lang.result

    if op == "create_keyval":
        c, d = require(fn, "copy_fn"), require(fn, "delete_fn")
        kv, ex = require(fn, "keyval_out"), require(fn, "extra_state")
        lines.append(ret(f"rt::on_create_keyval(call, reinterpret_cast<void*>({c}), reinterpret_cast<void*>({d}), {kv},\n"
                         f"      {lang.word(ex)},\n      {lang.keyval_forward(c, d, kv, ex)})"))
    elif op == "free_keyval":
        lines.append(ret(f"rt::on_free_keyval(call, {require(fn, 'keyval_inout')}, {fwd})"))
    elif op == "set_attr":
        o, kv, v = require(fn, "object"), require(fn, "keyval"), require(fn, "value")
        h, k = lang.handle(o, kind), lang.key(kv)
        # First resort (shadow mode): a query this thread already checked (runtime/fast_path.hpp).
        lines.append(f"  if (rt::QueryCache::Entry* q_ = rt::checked_set(api, {h}, {k}))")
        lines.append("    " + lang.early_result(f"rt::set_cached(call, *q_, {h}, {k}, {lang.word(v)}, {fwd})"))
        lines.append(ret(f"rt::on_set_attr(call, {h}, {k}, {lang.word(v)},\n"
                         f"      {fwd})"))
    elif op == "get_attr":
        o, kv = require(fn, "object"), require(fn, "keyval")
        v, f = require(fn, "value_out"), require(fn, "flag_out")
        h, k = lang.handle(o, kind), lang.key(kv)
        fwd = f"[=]() {{ return {lang.call_pmpi}; }}"  # by value: the fast path keeps them in registers
        # First resort, inline: a query this thread already checked (runtime/fast_path.hpp).
        lines.append(f"  if (const rt::QueryCache::Entry* q_ = rt::checked_query(api, {h}, {k}))")
        lines.append("    " + lang.early_result(f"rt::g_shadow ? rt::cross_check(api, call.caller, *q_, {v}, {f}, {fwd}) : "
                                                f"rt::answer(*q_, {v}, {f})"))
        lines.append(ret(f"rt::on_get_attr(call, {h}, {k}, {v}, {f}, {fwd})"))
    elif op == "delete_attr":
        o, kv = require(fn, "object"), require(fn, "keyval")
        lines.append(ret(f"rt::on_delete_attr(call, {lang.handle(o, kind)}, {lang.key(kv)}, {fwd})"))
    elif op == "dup":
        o, out = require(fn, "object"), require(fn, "object_out")
        req = role_param(fn, "request")
        wait = lang.wait(req) + " " if req else ""
        # Undo a dup the library made: through C handles, whatever the binding.
        new_c = f"{F2C[kind]}(*{out})" if isinstance(lang, Fortran) else f"*{out}"
        reset = f"{C2F[kind]}({NULL_HANDLE[kind]})" if isinstance(lang, Fortran) else NULL_HANDLE[kind]
        lines.append(ret(
            f"rt::on_dup(call, {lang.handle(o, kind)},\n"
            f"      [&](attrcheck::Handle* new_) {{\n"
            f"        const int rc_ = {lang.call_pmpi};\n"
            f"        if (rc_ == MPI_SUCCESS) *new_ = {lang.out_handle(out, kind)};\n"
            f"        return rc_;\n"
            f"      }},\n"
            f"      [&]() {{ {wait}{C_TYPE[kind]} c_ = {new_c}; {FREE_FN[kind]}(&c_); *{out} = {reset}; }})"))
    elif op == "construct":
        out = require(fn, "object_out")
        # A window constructor's baseptr (C: a void** passed as void*): the base MPI_WIN_BASE must
        # answer (runtime/hooks/window_base.hpp). The Fortran twins' is an address-sized integer:
        # not recorded (their MPI_WIN_BASE goes unchecked).
        base = role_param(fn, "window_base_out")
        note = (f"    if (rc_ == MPI_SUCCESS) rt::note_window_base(*new_, *static_cast<void* const*>({base}));\n"
                if base and not isinstance(lang, Fortran) else "")
        parent = role_param(fn, "parent")
        parent_handle = lang.handle(parent, kind) if parent else "0"
        lines.append(ret(
            f"rt::on_construct(call, {parent_handle}, [&](attrcheck::Handle* new_) {{\n"
            f"    const int rc_ = {lang.call_pmpi};\n"
            f"    *new_ = rc_ == MPI_SUCCESS ? {lang.out_handle(out, kind)} : rt::handle({NULL_HANDLE[kind]});\n"
            f"{note}"
            f"    return rc_;\n"
            f"  }})"))
    elif op == "obtain":
        if fn.get("returns") not in RETURNS:
            raise SpecError(f"{fn['name']}: op obtain needs 'returns' ({', '.join(RETURNS)})")
        pushes = [f"out_->push_back({lang.out_handle(p, kind)});"
                  for p, r in fn["roles"].items() if r == "object_out"]
        for p, r in fn["roles"].items():
            if r == "object_out_array":
                if "array_length" not in fn:
                    raise SpecError(f"{fn['name']}: an object_out_array needs 'array_length'")
                pushes.append(f"for (int i_ = 0, n_ = {lang.array_length(fn)}; i_ < n_; ++i_) "
                              f"out_->push_back({lang.elem_handle(p, 'i_', kind)});")
        if not pushes:
            raise SpecError(f"{fn['name']}: op obtain needs an object_out or object_out_array parameter")
        lines.append(ret(
            f"rt::on_obtain(call, rt::Returns::{RETURNS[fn['returns']]}, [&](std::vector<attrcheck::Handle>* out_) {{\n"
            f"    const int rc_ = {lang.call_pmpi};\n"
            f"    if (rc_ == MPI_SUCCESS) {{\n      " + "\n      ".join(pushes) + "\n    }\n"
            f"    return rc_;\n"
            f"  }})"))
    elif op == "free":
        lines.append(ret(f"rt::on_free(call, {lang.out_handle(require(fn, 'object_inout'), kind)}, {fwd})"))
    elif op == "init":
        prov = role_param(fn, "provided_out")  # an out-pointer in both languages
        set_prov = f"*provided_ = rc_ == MPI_SUCCESS ? *{prov} : MPI_THREAD_SINGLE;" if prov \
            else "*provided_ = MPI_THREAD_SINGLE;"
        required = lang.deref("required") if any(n == "required" for _, n in lang.params) else "MPI_THREAD_SINGLE"
        lines.append(ret(f"rt::on_init(call, {required}, [&](int* provided_) {{\n"
                         f"    const int rc_ = {lang.call_pmpi};\n"
                         f"    {set_prov}\n"
                         f"    return rc_;\n"
                         f"  }})"))
    elif op == "finalize":
        lines.append(ret(f"rt::on_finalize(call, {fwd})"))
    elif op == "abort":
        lines.append(ret(f"rt::on_abort(call, {lang.handle('comm', 'comm')}, {lang.deref('errorcode')}, {fwd})"))
    return lines


def out_of_line(fn, lang):
    """The part of a split wrapper (split_get, split_delete) that is not its common case: the whole
    wrapper body as an out-of-line function in an anonymous namespace, which takes where the call
    came from as its last parameter (the entry point's own arguments stay in their registers for
    the tail call), beside the wrapper's rt::Api (a namespace constant both
    parts share). Returns (the Api's name, the function's name, the lines)."""
    api, full = f"kApi_{fn['name']}", f"{fn['name']}_full"
    lang.caller = "caller_"
    lines = ["namespace {", f"constexpr rt::Api {api}{api_init(fn)};",
             f"[[gnu::noinline]] int {full}({fn['params']}, const void* caller_) {{"]
    lines += body(fn, lang, f"  const rt::Api& api = {api};")
    lines += ["}", "}  // namespace", ""]
    lang.caller = "__builtin_return_address(0)"
    return api, full, lines


def op_enum(op):
    return "".join(part.capitalize() for part in op.split("_"))


# Keyval creates and frees record the caller's whole stack (rt::origin_here): their wrappers hand
# over their own frame (which __builtin_frame_address(0) makes them keep), so that the walk starts
# at the application's frame instead of unwinding attrcheck's own frames first. The other wrappers
# keep no frame pointer for it.
STACK_OPS = ("create_keyval", "free_keyval")


# The family each op's calls are counted in (the report's "intercepted"); MPI_Init, MPI_Finalize
# and MPI_Abort are not counted.
FAMILIES = {"create_keyval": "Keyval", "free_keyval": "Keyval", "set_attr": "Attribute", "get_attr": "Attribute",
            "delete_attr": "Attribute", "dup": "Object", "construct": "Object", "obtain": "Object",
            "alias": "Object", "same": "Object", "new": "Object", "free": "Object"}


def chain_link(fn, lang):
    """(name, profiling twin, whether it is a C wrapper with a next hop, family, binding)."""
    family = f"static_cast<std::uint8_t>(rt::Family::{FAMILIES[fn['op']]})" if fn["op"] in FAMILIES \
        else "attrcheck::kCallFamilies"
    if type(lang) is C:
        return fn["name"], "P" + fn["name"], True, family, "static_cast<std::uint8_t>(rt::Lang::C)"
    binding = "F08" if isinstance(lang, F08) else "Fortran"
    return fn["symbol"], "p" + fn["symbol"], False, family, f"static_cast<std::uint8_t>(rt::Lang::{binding})"


def count_line(fn, lang):
    family = FAMILIES[fn["op"]]
    if type(lang) is C:
        return f"  rt::count_c_call<rt::Family::{family}>();"
    binding = "F08" if isinstance(lang, F08) else "Fortran"
    return f"  rt::count_call(rt::Family::{family}, rt::Lang::{binding});"


def call_line(fn, caller="__builtin_return_address(0)"):
    frame = ", __builtin_frame_address(0)" if fn["op"] in STACK_OPS else ""
    return f"  const rt::Call call{{&api, {caller}{frame}}};"


def narrow_entry(lines, fn, lang):
    """A C wrapper of a library whose handles are ints: the wrapper becomes attrcheck_impl_MPI_X
    (hidden), and MPI_X is an entry in assembly that jumps to it, or, once the program is known to
    run on another MPI library (process/chain.hpp: adopt_other_library), to that library's PMPI_X
    with every register as the program set it. A C wrapper would pass a pointer handle of that
    library's on as an int, cut to 32 bits."""
    name = fn["name"]
    signature = lang.signature() + " {"
    impl = signature.replace('extern "C" ATTRCHECK_EXPORT int ' + name + "(",
                             'extern "C" [[gnu::visibility("hidden")]] int attrcheck_impl_' + name + "(")
    # (the next hop's symbol: attrcheck::rt::chain::next_MPI_X, as the Itanium C++ ABI mangles it)
    hop = f"next_{name}"
    return [impl if line == signature else line for line in lines] + \
        [f"ATTRCHECK_NARROW_ENTRY({name}, _ZN9attrcheck2rt5chain{len(hop)}{hop}E)"]


def abi_weak(fn, lacking):
    """A function of the standard ABI that some library of it does not define (Open MPI's
    libmpi_abi has none of the MPI-1 caching calls, MPICH's has them): its profiling twin is a weak
    reference, and where the library in use has none the wrapper's next hop stands in for the
    symbol the program would not find natively either (rt::Absent, runtime/process/chain.hpp)."""
    name = fn["name"]
    return [f"// {name}: {', '.join(lacking)} does not define P{name}: a weak reference.",
            f'extern "C" int P{name}({fn["params"].strip() or "void"});',
            f"#pragma weak P{name}",
            f'static constexpr char kName_{name}[] = "{name}";',
            ""]


def generate(spec, declared, symbols=None, c_symbols=None, ext_header=False, narrow=False, abi_libs=None):
    """ext_header: the library declares its MPIX_ extensions in mpi-ext.h (Open MPI), which the
    wrappers then include when they wrap one of them. narrow: its handles are ints (narrow_entry).
    abi_libs: the standard ABI build's {library file: its symbols}, one per library of the ABI
    (abi_weak); c_symbols is then their union and `declared` what any of their headers declares."""
    out = [
        "// Generated by gen/gen_wrappers.py from wrappers/mpi.json. Do not edit.",
        '#include "runtime/call_counts.hpp"',
        '#include "runtime/fast_path.hpp"',
        '#include "runtime/hooks.hpp"',
        '#include "runtime/set_path.hpp"',
        '#include "runtime/process/chain.hpp"',
        "",
        "namespace rt = attrcheck::rt;",
        "",
    ]
    out.append(f"static_assert({'sizeof(MPI_Comm) < sizeof(void*)' if narrow else 'sizeof(MPI_Comm) == sizeof(void*)'}, "
               f"\"the generator read the handles as {'ints' if narrow else 'pointers'}\");")
    out.append("")
    count = 0
    links = []  # the chain table's entries (runtime/process/chain.hpp: ChainLink)
    weak = []  # the standard ABI build's functions some library of the ABI lacks (abi_weak)
    weak_decls = []  # (their declarations, before the next hops)
    hops = len(out)  # where each C wrapper's next hop is defined (below, once they are known)

    def emit(lang, fn):  # one wrapper, in whichever binding's adapter
        nonlocal count
        if type(lang) is C and fn["op"] == "get_attr":
            lines = split_get(fn, lang, out_of_line(fn, lang))
        elif type(lang) is C and fn["op"] == "set_attr":
            lines = split_set(fn, lang, out_of_line(fn, lang))
        elif type(lang) is C and fn["op"] == "delete_attr":
            lines = split_delete(fn, lang, out_of_line(fn, lang))
        else:
            lines = [lang.signature() + " {"] + body(fn, lang) + ["}"]
        # The entry point counts the call first (runtime/call_counts.hpp): the report's "intercepted".
        entry = lines.index(lang.signature() + " {")
        if fn["op"] in FAMILIES:
            lines.insert(entry + 1, count_line(fn, lang))
        links.append(chain_link(fn, lang))
        if narrow and type(lang) is C:
            lines = narrow_entry(lines, fn, lang)
        out.extend(lines)
        out.append("")
        count += 1

    for fn in spec["functions"]:
        check(fn)
        if fn.get("optional") and declared is not None and fn["name"] not in declared:
            out.append(f"// {fn['name']}: not declared by this MPI library, not intercepted.")
            out.append("")
            continue
        if fn.get("optional") and c_symbols is not None and "P" + fn["name"] not in c_symbols:
            out.append(f"// {fn['name']}: declared, but the library does not export P{fn['name']}: not intercepted.")
            out.append("")
            continue
        if abi_libs is not None:
            if fn["name"] not in declared or "P" + fn["name"] not in c_symbols:
                out.append(f"// {fn['name']}: no library of the standard ABI here has it, not intercepted.")
                out.append("")
                continue
            lacking = sorted(os.path.basename(lib) for lib, syms in abi_libs.items() if "P" + fn["name"] not in syms)
            if lacking:
                weak_decls.extend(abi_weak(fn, lacking))
                weak.append(fn["name"])
        emit(C(fn, parse_params(fn["params"], fn["name"])), fn)
        if ext_header and fn["name"].startswith("MPIX_") and "#include <mpi-ext.h>" not in out:
            # (after mpi.h, which the runtime's headers include: it needs mpi.h's definitions)
            out.insert(out.index('#include "runtime/set_path.hpp"') + 1, "#include <mpi-ext.h>")
    out.append("// ---- Fortran (mpif.h / use mpi) entry points ----")
    out.append("")
    if abi_libs is None:  # (the standard ABI has no Fortran binding, nor MPI_Fint)
        out.append("static_assert(sizeof(MPI_Fint) == sizeof(int), \"keyvals and flags are passed as int*\");")
        out.append("")
    for fn in fortran_entries(spec, symbols):
        for key in ("symbol", "name", "op", "params", "roles", "binding"):
            if key not in fn:
                raise SpecError(f"{fn.get('symbol', '?')}: missing '{key}'")
        if fn["op"] not in ("init", "finalize", "abort") and fn.get("kind") not in KINDS:
            raise SpecError(f"{fn['symbol']}: op {fn['op']} needs a kind")
        if fn["binding"] not in ("aint", "int"):
            raise SpecError(f"{fn['symbol']}: binding must be 'aint' or 'int'")
        emit(Fortran(fn, parse_params(fn["params"], fn["symbol"])), fn)
    out.append("// ---- `use mpi_f08` entry points: the Fortran ones' twins ----")
    out.append("")
    for fn in f08_entries(spec, symbols):
        emit(F08(fn, parse_params(fn["params"], fn["symbol"])), fn)
    # Each C wrapper's next hop: the library's PMPI_X until resolve_chain() finds a tool's MPI_X.
    c_fns = [lk[0] for lk in links if lk[2]]
    out[hops:hops] = weak_decls + ["namespace attrcheck::rt::chain {"] + \
        [f"[[gnu::visibility(\"hidden\")]] decltype(&P{n}) next_{n} = "
         + (f"&P{n} ? &P{n} : &rt::Absent<kName_{n}, decltype(&P{n})>::call;" if n in weak else f"&P{n};")
         for n in c_fns] + ["}  // namespace attrcheck::rt::chain", ""]
    out.append("// Every intercepted entry point, for resolve_chain() (runtime/process/chain.cpp).")
    out.append("const attrcheck::rt::ChainLink attrcheck::rt::kChainLinks[] = {")
    for name, pmpi, c, family, binding in links:
        nxt = f"reinterpret_cast<void**>(&rt::chain::next_{name})" if c else "nullptr"
        out.append(f'    {{"{name}", "{pmpi}", {nxt}, {family}, {binding}}},')
    out.append("};")
    out.append(f"const std::size_t attrcheck::rt::kChainLinkCount = {len(links)};")
    out.append("")
    out.append(f"// {count} wrappers.")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("out")
    ap.add_argument("--mpi-header")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--cc", help="the C compiler: read --mpi-header preprocessed (gen/mpi_header.py)")
    ap.add_argument("--mpi-libs", help="the MPI library's C libraries (a ;-list): an optional function is "
                    "generated only if they export its profiling twin")
    ap.add_argument("--fortran-libs", help="the MPI library's Fortran libraries (a ;-list, may be empty): "
                    "only the Fortran entry points they export (with their profiling twins) are wrapped")
    ap.add_argument("--standard-abi", action="store_true",
                    help="the standard ABI build: --mpi-libs are the libraries of the ABI (libmpi_abi, one per MPI "
                    "library), --also-headers their other mpi.h; a function any of them has is wrapped, and one that "
                    "some lack forwards through a weak reference")
    ap.add_argument("--also-headers", default="", help="the standard ABI build: the other libraries' mpi.h (a ;-list)")
    a = ap.parse_args(argv)
    with open(a.spec) as f:
        spec = json.load(f)
    declared = None
    narrow = False
    try:
        if a.mpi_header and a.cc:
            text = mpi_header.preprocess(a.cc, a.mpi_header)
            declared = set(mpi_header.prototypes(text))
            narrow = mpi_header.narrow_handles(text)
        elif a.mpi_header:
            with open(a.mpi_header) as f:
                text = f.read()
            declared = set(re.findall(r"\bint\s+(MPIX?_[A-Za-z0-9_]+)\s*\(", text))
            narrow = mpi_header.narrow_handles(text)
        abi_libs = None
        if a.standard_abi:
            for other in (h for h in a.also_headers.split(";") if h):
                declared |= set(mpi_header.prototypes(mpi_header.preprocess(a.cc, other)))
            abi_libs = {lib: library_symbols(a.nm, [lib]) for lib in a.mpi_libs.split(";") if lib}
        symbols = c_symbols = None
        if a.fortran_libs is not None:
            symbols = library_symbols(a.nm, [lib for lib in a.fortran_libs.split(";") if lib])
        if a.mpi_libs:
            c_symbols = library_symbols(a.nm, [lib for lib in a.mpi_libs.split(";") if lib])
        ext_header = bool(a.mpi_header) and os.path.exists(os.path.join(os.path.dirname(a.mpi_header), "mpi-ext.h"))
        text = generate(spec, declared, symbols, c_symbols, ext_header, narrow, abi_libs)
    except (SpecError, RuntimeError) as e:
        print(f"gen_wrappers: {a.spec}: {e}", file=sys.stderr)
        return 1
    with open(a.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
