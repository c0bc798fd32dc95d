"""Programs of the differential fuzzer: what they are made of, how they are generated from a
seed, kept legal, and written out as C.

A program is a list of keyvals (what their callbacks do), a list of objects (logical names; 0 is
MPI_COMM_WORLD, 1 MPI_COMM_SELF) and a body of ops. Its epilogue (free what is still live,
delete MPI_COMM_WORLD's attributes, free the keyvals, MPI_Finalize) is derived from the model's
state after the body, so that dropping ops (the shrinker) leaves a complete, legal program.
"""
import json
import os
import random

import model as M
from model import (K_COMM, K_TYPE, K_WIN, C_NULL, C_DUP, C_DECLINE, C_COPY, C_TRANSFORM, C_BADFLAG,
                   C_FAIL, D_NULL, D_OK, D_FAIL, A_NONE, A_FREE_OWN, A_FREE_KEY, A_SET_OTHER,
                   A_TMP_TYPE, A_TMP_COMM, A_FREE_OBJ, A_REENTER, W_COPY, W_DELETE)

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = {K_COMM: "c", K_TYPE: "t", K_WIN: "w"}

# Constructs that run into a known bug or library divergence (known.py), which the generator can
# be told to leave out (--avoid) so that the others can still be found.
AVOIDABLE = {
    "own-keyval-free-in-replace": "no replacing set whose old value's delete callback frees its own keyval",
    "window-on-attributed-comm": "no window on a communicator carrying attributes with a copy callback",
    "type-win-replace": "no replacing set of a datatype or window attribute with a user delete callback",
    "win-allocate": "no MPI_Win_allocate (MPI_Win_create only)",
}

# Rules a program can be seeded with, one erroneous call each. Left out, and why:
#   callback.exception  a C++ exception escaping a callback: the programs are C.
#   callback.crash      a callback's fatal signal ends the run, so "nothing else is reported"
#                       cannot be checked on the rest of the program (tests/mpi/cases cover it).
#   callback.after-finalize  needs a delete callback on MPI_COMM_WORLD run late in MPI_Finalize,
#                       which is itself attr.world-at-finalize: never exactly one rule.
#   thread.level        needs a second thread; the programs are single-threaded.
#   attr.truncated      Fortran MPI_ATTR_GET into a default INTEGER only.
#   impl.divergence, library.divergence, tool.limit  about the library or the tool, not the program.
#   deprecated.constant on MPICH: its MPI-1 constants are the same values as the current ones
#                       (docs/rules.md), nothing can tell them apart; seeded on Open MPI only.
SEEDABLE = ["keyval.double-free", "keyval.kind-mismatch", "keyval.unknown", "keyval.invalid",
            "keyval.freed", "keyval.predefined", "attr.delete-absent", "object.invalid", "arg.null",
            "callback.error", "callback.bad-flag", "callback.reentrant", "attr.leak", "keyval.leak",
            "attr.world-at-finalize", "deprecated.call", "deprecated.constant",
            "lifecycle.before-init", "lifecycle.after-finalize"]


class Program:
    def __init__(self, seed, kind="legal"):
        self.seed = seed
        self.kind = kind            # "legal" or the seeded rule
        self.keyvals = []
        self.objects = [{"name": "world", "kind": K_COMM}, {"name": "self", "kind": K_COMM}]
        self.body = []
        self.leak_obj = self.leak_key = self.keep_world = None

    def copy(self, body):
        p = Program(self.seed, self.kind)
        p.keyvals, p.objects = self.keyvals, self.objects
        p.body = list(body)
        p.leak_obj, p.leak_key, p.keep_world = self.leak_obj, self.leak_key, self.keep_world
        return p

    def to_json(self):
        return {"seed": self.seed, "kind": self.kind, "keyvals": self.keyvals, "objects": self.objects,
                "body": self.body, "leak_obj": self.leak_obj, "leak_key": self.leak_key,
                "keep_world": self.keep_world}

    @staticmethod
    def from_json(d):
        p = Program(d["seed"], d["kind"])
        p.keyvals, p.objects, p.body = d["keyvals"], d["objects"], d["body"]
        p.leak_obj, p.leak_key, p.keep_world = d.get("leak_obj"), d.get("leak_key"), d.get("keep_world")
        return p

    def add_key(self, kind, copy=C_NULL, delete=D_NULL, act=A_NONE, when=0, arg=0, aux=0, deprecated=False,
                depconst=False, is_aux=False):
        idx = len(self.keyvals)
        self.keyvals.append({"name": f"k{idx}", "kind": kind, "copy": copy, "del": delete, "act": act,
                             "when": when, "arg": arg, "aux": aux, "deprecated": deprecated,
                             "depconst": depconst, "is_aux": is_aux})
        return idx

    def add_obj(self, kind, victim=False):
        idx = len(self.objects)
        self.objects.append({"name": f"{PREFIX[kind]}{idx}", "kind": kind, "victim": victim})
        return idx

    # ---- the whole op list ----
    def ops(self):
        """body (its illegal ops dropped, as the model sees them) + epilogue + MPI_Finalize."""
        m = M.Model(self)
        out = []
        for op in self.body:
            if m.legal(op):
                m.apply(len(out), op)
                out.append(op)
        for op in epilogue(m, self):
            m.apply(len(out), op)
            out.append(op)
        out.append({"op": "finalize"})
        return out


def epilogue(m, p):
    """Ops that free everything the body left live (windows, MPI_COMM_WORLD's attributes, objects,
    keyvals), applied to `m` as they are made (callbacks may free keyvals or set attributes)."""
    ops = []

    def emit(op):
        if m.legal(op):
            m.apply(-1, op)
            ops.append(op)

    for o in m.objs:
        if o.kind == K_WIN and o.live and o.idx != p.leak_obj:
            emit({"op": "win_free", "o": o.idx})
    for kidx in list(m.objs[0].attrs):
        if kidx != p.keep_world:
            emit({"op": "delete", "o": 0, "k": kidx})
    for o in m.objs[2:]:
        if o.live and o.idx != p.leak_obj:
            emit({"op": "comm_free" if o.kind == K_COMM else "type_free" if o.kind == K_TYPE else "win_free",
                  "o": o.idx})
    for k in m.keys:
        if k.made and k.live and k.idx != p.leak_key:
            emit({"op": "kv_free", "k": k.idx})
    return ops


# ---- generation ----

class Gen:
    def __init__(self, seed, avoid=(), kind="legal", nops=None, deprecated=True):
        self.rng = random.Random(f"{kind}:{seed}")
        self.p = Program(seed, kind)
        self.m = M.Model(self.p)
        self.avoid = set(avoid)
        self.deprecated = deprecated
        self.nops = nops if nops is not None else self.rng.randint(12, 40)

    # keep the model's tables in step with the program's
    def key(self, kind, **kw):
        idx = self.p.add_key(kind, **kw)
        self.m.keys.append(M.Key(idx, self.p.keyvals[idx]))
        return idx

    def obj(self, kind, victim=False):
        idx = self.p.add_obj(kind, victim)
        self.m.objs.append(M.Obj(idx, self.p.objects[idx]["name"], kind))
        return idx

    def emit(self, op):
        if not self.m.legal(op):
            return False
        self.m.apply(len(self.p.body), op)
        self.p.body.append(op)
        return True

    def live_objs(self, kind=None, predefined=True):
        return [o for o in self.m.objs if o.live and (kind is None or o.kind == kind)
                and (predefined or o.idx >= 2)]

    def live_keys(self, kind=None):
        return [k for k in self.m.keys if k.made and k.live and (kind is None or k.kind == kind)]

    def new_key(self):
        r = self.rng
        kind = r.choices([K_COMM, K_TYPE, K_WIN], [5, 3, 2])[0]
        deprecated = self.deprecated and kind == K_COMM and r.random() < 0.15
        if kind == K_WIN:
            copy = r.choice([C_NULL, C_DUP, C_COPY])
        else:
            copy = r.choice([C_NULL, C_DUP, C_DECLINE, C_COPY, C_TRANSFORM, C_TRANSFORM, C_COPY])
        delete = r.choice([D_NULL, D_OK, D_OK, D_OK])
        act, when, arg, aux = A_NONE, 0, 0, 0
        whens = ([W_COPY] if copy >= C_DECLINE and kind != K_WIN else []) + ([W_DELETE] if delete == D_OK else [])
        if whens and r.random() < 0.6:
            when = r.choice(whens)
            act = r.choice([A_FREE_OWN, A_FREE_KEY, A_SET_OTHER, A_SET_OTHER, A_TMP_TYPE, A_TMP_COMM, A_FREE_OBJ])
            if act == A_FREE_KEY:
                others = [k for k in self.m.keys if k.made and not k.spec["is_aux"]]
                if not others:
                    act = A_FREE_OWN
                else:
                    arg = r.choice(others).idx
            if act == A_SET_OTHER:
                targets = [o for o in self.m.objs[1:] if o.live]  # never MPI_COMM_WORLD
                t = r.choice(targets)
                arg = t.idx
                aux = self.key(t.kind, copy=C_NULL, delete=D_OK, is_aux=True)
                self.emit({"op": "kv_create", "k": aux})
            if act == A_FREE_OBJ:
                arg = self.obj(K_TYPE, victim=True)
                self.emit({"op": "type_new", "src": -1, "dst": arg, "how": 0})
        k = self.key(kind, copy=copy, delete=delete, act=act, when=when, arg=arg, aux=aux, deprecated=deprecated)
        self.emit({"op": "kv_create", "k": k})

    def step(self):
        r = self.rng
        choice = r.choices(["key", "comm", "type", "win", "set", "get", "delete", "kv_free", "free", "self", "dup"],
                           [3, 3, 3, 1.2, 9, 2, 2, 1.2, 2, 1.5, 3])[0]
        if choice == "dup":
            # a dup of an object that carries attributes: where copy callbacks run
            objs = [o for o in self.live_objs() if o.attrs and o.kind != K_WIN]
            if not objs or len(self.live_objs()) > 14:
                return
            o = r.choice(objs)
            if o.kind == K_COMM:
                self.emit({"op": "comm_new", "src": o.idx, "dst": self.obj(K_COMM), "how": r.choice([0, 0, 1])})
            elif not self.p.objects[o.idx].get("victim"):
                self.emit({"op": "type_new", "src": o.idx, "dst": self.obj(K_TYPE), "how": 2})
            return
        if choice == "key" and len(self.live_keys()) < 8:
            self.new_key()
        elif choice == "comm" and len(self.live_objs(K_COMM)) < 7:
            comms = self.live_objs(K_COMM)
            src = r.choices(comms, [1 + 3 * len(c.attrs) for c in comms])[0]
            self.emit({"op": "comm_new", "src": src.idx, "dst": self.obj(K_COMM), "how": r.choice([0, 0, 1, 2, 3])})
        elif choice == "type" and len(self.live_objs(K_TYPE)) < 6:
            srcs = [o for o in self.live_objs(K_TYPE) if not self.p.objects[o.idx].get("victim")]
            if srcs and r.random() < 0.7:
                src = r.choices(srcs, [1 + 3 * len(t.attrs) for t in srcs])[0]
                self.emit({"op": "type_new", "src": src.idx, "dst": self.obj(K_TYPE), "how": r.choice([1, 2, 2])})
            else:
                self.emit({"op": "type_new", "src": -1, "dst": self.obj(K_TYPE), "how": 0})
        elif choice == "win" and len(self.live_objs(K_WIN)) < 3:
            comms = self.live_objs(K_COMM)
            if "window-on-attributed-comm" in self.avoid:
                comms = [c for c in comms if not any(self.m.keys[k].spec["copy"] != C_NULL for k in c.attrs)]
            if comms:
                c = r.choices(comms, [1 + 2 * len(x.attrs) for x in comms])[0]
                how = 0 if "win-allocate" in self.avoid else r.choice([0, 1])
                self.emit({"op": "win_new", "c": c.idx, "w": self.obj(K_WIN), "how": how})
        elif choice in ("set", "self", "get"):
            objs = [self.m.objs[1]] if choice == "self" else [o for o in self.live_objs() if self.live_keys(o.kind)]
            if not objs:
                return
            # half the time an object that carries attributes already: replacing sets, several keys
            carrying = [o for o in objs if o.attrs]
            o = r.choice(carrying if carrying and r.random() < 0.5 else objs)
            keys = self.live_keys(o.kind)
            if not keys:
                return
            present = [k for k in keys if k.idx in o.attrs]
            k = r.choice(present if present and choice == "set" and r.random() < 0.4 else keys)
            depr = self.deprecated and o.kind == K_COMM and r.random() < 0.12
            if choice == "get":
                self.emit({"op": "get", "o": o.idx, "k": k.idx, "deprecated": depr})
                return
            if k.idx in o.attrs and not self.replace_ok(o, k):
                return
            self.emit({"op": "set", "o": o.idx, "k": k.idx, "v": r.randint(1, 99), "deprecated": depr})
        elif choice == "delete":
            present = [(o, kidx) for o in self.live_objs() for kidx in o.attrs]
            if present:
                o, kidx = r.choice(present)
                depr = self.deprecated and o.kind == K_COMM and r.random() < 0.12
                self.emit({"op": "delete", "o": o.idx, "k": kidx, "deprecated": depr})
        elif choice == "kv_free":
            keys = self.live_keys()
            if keys:
                k = r.choice(keys)
                depr = self.deprecated and k.spec["deprecated"] and r.random() < 0.7
                self.emit({"op": "kv_free", "k": k.idx, "deprecated": depr})
        elif choice == "free":
            objs = self.live_objs(predefined=False)
            if objs:
                o = r.choice(objs)
                self.emit({"op": {K_COMM: "comm_free", K_TYPE: "type_free", K_WIN: "win_free"}[o.kind], "o": o.idx})

    def replace_ok(self, o, k):
        s = k.spec
        if "own-keyval-free-in-replace" in self.avoid and s["act"] == A_FREE_OWN and s["when"] == W_DELETE:
            return False
        if "type-win-replace" in self.avoid and o.kind in (K_TYPE, K_WIN) and s["del"] != D_NULL:
            return False
        return True

    def body(self):
        tries = 0
        while len(self.p.body) < self.nops and tries < self.nops * 20:
            tries += 1
            self.step()
        return self.p


def generate(seed, avoid=(), deprecated=True):
    """A legal program; with deprecated=False it makes none of the MPI-1 calls (a library without
    them: Open MPI's standard ABI library)."""
    return Gen(seed, avoid, deprecated=deprecated).body()


def generate_seeded(seed, rule, avoid=(), library="openmpi"):
    """A legal program (without deprecated calls) with one erroneous call of `rule` added."""
    g = Gen(seed, avoid, kind=rule, deprecated=False)
    g.nops = g.rng.randint(4, 16)
    g.body()
    r = g.rng
    p = g.p

    def comm_key(**kw):
        k = g.key(K_COMM, **kw)
        g.emit({"op": "kv_create", "k": k})
        return k

    def new_comm():
        c = g.obj(K_COMM)
        g.emit({"op": "comm_new", "src": 0, "dst": c, "how": 0})
        return c

    if rule == "keyval.double-free":
        g.emit({"op": "seed_double_free", "k": comm_key(copy=C_COPY, delete=D_OK)})
    elif rule == "keyval.kind-mismatch":
        t = g.obj(K_TYPE)
        g.emit({"op": "type_new", "src": -1, "dst": t, "how": 0})
        if r.random() < 0.5:
            g.emit({"op": "seed_kind_mismatch", "o": t, "k": comm_key()})
        else:
            k = g.key(K_TYPE)
            g.emit({"op": "kv_create", "k": k})
            g.emit({"op": "seed_kind_mismatch", "o": r.choice([0, 1]), "k": k})
    elif rule == "keyval.unknown":
        g.emit({"op": "seed_unknown", "o": r.choice([0, 1])})
    elif rule == "keyval.invalid":
        g.emit({"op": "seed_invalid", "o": r.choice([0, 1])})
    elif rule == "keyval.freed":
        k = comm_key(delete=D_OK)
        g.emit({"op": "kv_free", "k": k})
        g.emit({"op": "seed_freed", "o": r.choice([0, 1]), "k": k})
    elif rule == "keyval.predefined":
        g.emit({"op": "seed_set_predefined"})
    elif rule == "attr.delete-absent":
        g.emit({"op": "seed_delete_absent", "o": 1, "k": comm_key(delete=D_OK)})
    elif rule == "object.invalid":
        g.emit({"op": r.choice(["seed_null_handle", "seed_free_predefined"])})
    elif rule == "arg.null":
        g.emit({"op": "seed_null_flag", "o": r.choice([0, 1]), "k": comm_key()})
    elif rule == "callback.error":
        c = new_comm()
        if r.random() < 0.5:
            k = comm_key(copy=C_FAIL, delete=D_OK)
            g.emit({"op": "set", "o": c, "k": k, "v": 5})
            g.emit({"op": "comm_new", "src": c, "dst": g.obj(K_COMM), "how": 0})
        else:
            k = comm_key(copy=C_COPY, delete=D_FAIL)
            g.emit({"op": "set", "o": c, "k": k, "v": 5})
            g.emit({"op": "delete", "o": c, "k": k})
    elif rule == "callback.bad-flag":
        c = new_comm()
        k = comm_key(copy=C_BADFLAG, delete=D_OK)
        g.emit({"op": "set", "o": c, "k": k, "v": 5})
        g.emit({"op": "comm_new", "src": c, "dst": g.obj(K_COMM), "how": 0})
    elif rule == "callback.reentrant":
        c = new_comm()
        k = comm_key(copy=C_NULL, delete=D_OK, act=A_REENTER, when=W_DELETE)
        g.emit({"op": "set", "o": c, "k": k, "v": 5})
        g.emit({"op": "delete", "o": c, "k": k})
    elif rule == "attr.leak":
        t = g.obj(K_TYPE)
        g.emit({"op": "type_new", "src": -1, "dst": t, "how": 0})
        k = g.key(K_TYPE, delete=D_OK)
        g.emit({"op": "kv_create", "k": k})
        g.emit({"op": "set", "o": t, "k": k, "v": 9})
        p.leak_obj = t
    elif rule == "keyval.leak":
        p.leak_key = comm_key(delete=r.choice([D_NULL, D_OK]))
    elif rule == "attr.world-at-finalize":
        k = comm_key(delete=D_OK)
        g.emit({"op": "set", "o": 0, "k": k, "v": 9})
        p.keep_world = k
    elif rule == "deprecated.call":
        g.emit({"op": "get", "o": r.choice([0, 1]), "k": comm_key(), "deprecated": True})
    elif rule == "deprecated.constant":
        comm_key(depconst=True)
    elif rule == "lifecycle.before-init":
        g.emit({"op": "seed_before_init"})
    elif rule == "lifecycle.after-finalize":
        g.emit({"op": "seed_after_finalize"})
    else:
        raise ValueError(rule)
    return p


# ---- C ----

def c_source(p, comment=""):
    """(C text, {C line: op index}) of program p; `comment` goes at its top."""
    ops = p.ops()
    with open(os.path.join(HERE, "prelude.c")) as f:
        prelude = f.read()
    head = ["/* attrcheck differential fuzzer program (tests/fuzz): %s seed %s" % (p.kind, p.seed)]
    for line in comment.splitlines():
        head.append(" * " + line.replace("*/", "* /") if line else " *")
    head.append(" * Build: mpicc -g -w -o prog prog.c   Run: ./prog TRACE (writes TRACE.RANK) */")
    lines = head + [f"#define NK {max(1, len(p.keyvals))}", f"#define NO {len(p.objects)}",
                    "#define FUZZ_DEPRECATED_CONSTANTS 1"]
    lines += prelude.splitlines()
    lines.append("static void tables(void) {")
    for i, k in enumerate(p.keyvals):
        lines.append(f'  kv[{i}] = (KV){{"{k["name"]}", {k["kind"]}, {k["copy"]}, {k["del"]}, {k["act"]}, '
                     f'{k["when"]}, {k["arg"]}, {k["aux"]}, {int(k["deprecated"])}, {int(k["depconst"])}, 0, 0, 0}};')
    for i, o in enumerate(p.objects[2:], start=2):
        lines.append(f'  ob[{i}].name = "{o["name"]}"; ob[{i}].kind = {o["kind"]};')
    lines.append("}")
    lines.append("int main(int argc, char **argv) {")
    at = {}
    if any(op["op"] == "seed_before_init" for op in ops):
        lines.append("  seed_before_init();")
    lines.append("  start(&argc, &argv);")
    lines.append("  tables();")
    after = False
    for i, op in enumerate(ops):
        text = c_call(i, op, p)
        if op["op"] == "seed_after_finalize":
            after = True
            continue
        if text:
            at[len(lines) + 1] = i
            lines.append("  " + text)
    if after:
        lines.append("  seed_after_finalize();")
    lines.append("  if (T) fclose(T);")
    lines.append("  return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n", at


def c_call(i, op, p):
    t = op["op"]
    d = int(bool(op.get("deprecated")))
    if t == "kv_create":
        return f"op_kv_create({i}, {op['k']});"
    if t == "kv_free":
        return f"op_kv_free({i}, {op['k']}, {d});"
    if t == "set":
        return f"op_set({i}, {op['o']}, {op['k']}, {op['v']}, {d});"
    if t == "get":
        return f"op_get({i}, {op['o']}, {op['k']}, {d});"
    if t in ("delete", "seed_delete_absent"):
        return f"op_delete({i}, {op['o']}, {op['k']}, {d});"
    if t == "comm_new":
        return f"op_comm_new({i}, {op['src']}, {op['dst']}, {op['how']});"
    if t == "comm_free":
        return f"op_comm_free({i}, {op['o']});"
    if t == "type_new":
        return f"op_type_new({i}, {op['src']}, {op['dst']}, {op['how']});"
    if t == "type_free":
        return f"op_type_free({i}, {op['o']});"
    if t == "win_new":
        return f"op_win_new({i}, {op['c']}, {op['w']}, {op['how']});"
    if t == "win_free":
        return f"op_win_free({i}, {op['o']});"
    if t == "finalize":
        return f"finish({i});"
    if t == "seed_double_free":
        return f"seed_double_free({i}, {op['k']});"
    if t == "seed_kind_mismatch":
        return f'seed_get_key({i}, {op["o"]}, kh[{op["k"]}], "{p.keyvals[op["k"]]["name"]}(other kind)");'
    if t == "seed_freed":
        return f'seed_get_key({i}, {op["o"]}, kh[{op["k"]}], "{p.keyvals[op["k"]]["name"]}(freed)");'
    if t == "seed_unknown":
        return f'seed_get_key({i}, {op["o"]}, 0x5eed, "never-created");'
    if t == "seed_invalid":
        return f'seed_get_key({i}, {op["o"]}, MPI_KEYVAL_INVALID, "MPI_KEYVAL_INVALID");'
    if t == "seed_set_predefined":
        return f"seed_set_predefined({i});"
    if t == "seed_null_handle":
        return f"seed_null_handle({i});"
    if t == "seed_free_predefined":
        return f"seed_free_predefined({i});"
    if t == "seed_null_flag":
        return f"seed_null_flag({i}, {op['o']}, {op['k']});"
    if t in ("seed_before_init", "seed_after_finalize"):
        return None
    raise ValueError(t)
