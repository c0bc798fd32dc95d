"""The model of MPI attribute caching the fuzzer's programs are checked against.

It executes a program's op list (program.py) the way tests/fuzz/prelude.c does, with the MPI
library replaced by the standard (MPI-4.x, "Caching"), and prints the trace the program must
print. `Behaviour` switches on what a library does where it departs from the standard or where
the standard is silent, release series by release series (src/runtime/profile/mpi_profile.def,
plus what the library is known to do that the profile does not list yet), so that one model
predicts a native run, a shadow run (which forwards to the library) and an emulate run (which
follows the standard except for BEHAVIOURs).

The model is also the generator's and the shrinker's idea of what is legal: `legal(op)`.
"""
import dataclasses

K_COMM, K_TYPE, K_WIN = 0, 1, 2
C_NULL, C_DUP, C_DECLINE, C_COPY, C_TRANSFORM, C_BADFLAG, C_FAIL = range(7)
D_NULL, D_OK, D_FAIL = range(3)
A_NONE, A_FREE_OWN, A_FREE_KEY, A_SET_OTHER, A_TMP_TYPE, A_TMP_COMM, A_FREE_OBJ, A_REENTER = range(8)
W_COPY, W_DELETE = 1, 2

SET = {K_COMM: "MPI_Comm_set_attr", K_TYPE: "MPI_Type_set_attr", K_WIN: "MPI_Win_set_attr"}
GET = {K_COMM: "MPI_Comm_get_attr", K_TYPE: "MPI_Type_get_attr", K_WIN: "MPI_Win_get_attr"}
DEL = {K_COMM: "MPI_Comm_delete_attr", K_TYPE: "MPI_Type_delete_attr", K_WIN: "MPI_Win_delete_attr"}
CREATE_KV = {K_COMM: "MPI_Comm_create_keyval", K_TYPE: "MPI_Type_create_keyval", K_WIN: "MPI_Win_create_keyval"}
FREE_KV = {K_COMM: "MPI_Comm_free_keyval", K_TYPE: "MPI_Type_free_keyval", K_WIN: "MPI_Win_free_keyval"}
COMM_NEW = ["MPI_Comm_dup", "MPI_Comm_idup+MPI_Wait", "MPI_Comm_split", "MPI_Comm_split(rank)"]
TYPE_NEW = ["MPI_Type_contiguous(int)", "MPI_Type_contiguous", "MPI_Type_dup"]
WIN_NEW = ["MPI_Win_create", "MPI_Win_allocate"]


@dataclasses.dataclass
class Behaviour:
    """What the library does that the standard does not say (or says otherwise)."""
    type_free_defers: bool = False      # type-free-defers-delete-callbacks
    self_first_set_order: bool = False  # self-delete-order-ignores-reset
    world_deleted_at_finalize: bool = False  # world-attributes-deleted-at-finalize (BEHAVIOUR)
    win_internal_dup: bool = False      # win-constructors-dup-communicator: MPI_Win_create / _allocate
                                        # dup the communicator with its attributes

    @staticmethod
    def for_run(profile, run):
        """The model of a `run` ("native", "shadow": the library's; "emulate": the standard's,
        with the release's BEHAVIOURs) on the release `profile` (tests/mpi_config.py)."""
        lib = run in ("native", "shadow")
        div = profile.get("divergences", {})
        return Behaviour(
            type_free_defers=lib and "type-free-defers-delete-callbacks" in div,
            self_first_set_order=lib and "self-delete-order-ignores-reset" in div,
            world_deleted_at_finalize=bool(profile.get("world-attributes-deleted-at-finalize")),
            win_internal_dup=lib and "win-constructors-dup-communicator" in div)


class Key:
    def __init__(self, idx, spec):
        self.idx, self.spec = idx, spec
        self.name = spec["name"]
        self.kind = spec["kind"]
        self.made = self.live = False
        self.sets = 0
        self.failed = False
        self.reentered = 0


class Obj:
    def __init__(self, idx, name, kind):
        self.idx, self.name, self.kind = idx, name, kind
        self.live = False        # the program's view: made and not freed
        self.dead = False        # freed by the program (a datatype may still be held)
        self.attrs = {}          # key idx -> [value, first set seq, last set seq]
        self.holders = 0         # datatypes built from this one, not yet destroyed
        self.sources = []        # datatypes this one was built from
        self.internal = None     # a window's internal communicator
        self.busy = False


class Model:
    def __init__(self, program, behaviour=None, rank=0, size=1):
        self.p = program
        self.b = behaviour or Behaviour()
        self.rank, self.size = rank, size
        self.keys = [Key(i, s) for i, s in enumerate(program.keyvals)]
        self.objs = [Obj(i, o["name"], o["kind"]) for i, o in enumerate(program.objects)]
        for o in self.objs[:2]:
            o.live = True
        self.depth = 0
        self.seq = 0
        self.lines = []

    # ---- trace ----
    def tr(self, text):
        self.lines.append("  " * self.depth + text)

    # ---- callbacks (prelude.c copy_cb / del_cb) ----
    def copy(self, k, obj, value):
        """(flag, value out, rc) of keyval k's copy callback for obj."""
        s = k.spec
        if s["copy"] == C_NULL:
            return 0, 0, "ok"
        if s["copy"] == C_DUP:
            return 1, value, "ok"
        self.depth += 1
        f, o, rc = 0, 0, "ok"
        c = s["copy"]
        if c == C_COPY:
            f, o = 1, value
        elif c == C_TRANSFORM:
            f, o = 1, value + 7
        elif c == C_BADFLAG:
            f, o = 2, value
        elif c == C_FAIL:
            if not k.failed:
                k.failed, rc = True, "ERR_OTHER"
            else:
                f, o = 1, value
        if s["act"] and s["when"] == W_COPY and self.depth == 1:
            self.act(k, obj)
        self.tr(f"cb copy {obj.name} {k.name} in={value} flag={f} out={o if f else 0} rc={rc}")
        self.depth -= 1
        return f, o, rc

    def delete(self, k, obj, value):
        s = k.spec
        if s["del"] == D_NULL:
            return "ok"
        self.depth += 1
        rc = "ok"
        if s["del"] == D_FAIL and not k.failed:
            k.failed, rc = True, "ERR_OTHER"
        if s["act"] and s["when"] == W_DELETE and self.depth == 1:
            self.act(k, obj)
        self.tr(f"cb delete {obj.name} {k.name} in={value} rc={rc}")
        self.depth -= 1
        return rc

    def free_key_action(self, k):
        if not k.made or not k.live:
            self.tr(f"skip {FREE_KV[k.kind]} {k.name}")
            return
        k.live = False
        self.tr(f"{FREE_KV[k.kind]} {k.name} rc=ok")

    def act(self, k, obj):
        s = k.spec
        a = s["act"]
        if a == A_FREE_OWN:
            self.free_key_action(k)
        elif a == A_FREE_KEY:
            self.free_key_action(self.keys[s["arg"]])
        elif a == A_SET_OTHER:
            t, aux = self.objs[s["arg"]], self.keys[s["aux"]]
            if not t.live or t.busy or t is obj or not aux.made or not aux.live:
                self.tr(f"skip {SET[t.kind]} {t.name} {aux.name}")
                return
            k.sets += 1
            v = 500 + k.sets
            t.busy = True
            rc = self.set_value(t, aux, v)
            t.busy = False
            self.tr(f"{SET[t.kind]} {t.name} {aux.name} v={v} rc={rc}")
        elif a == A_TMP_TYPE:
            self.tr("tmp-type rc=ok")
        elif a == A_TMP_COMM:
            self.tr("tmp-comm rc=ok")
        elif a == A_FREE_OBJ:
            t = self.objs[s["arg"]]
            if not t.live or t.busy or t is obj:
                self.tr(f"skip MPI_Type_free {t.name}")
                return
            t.busy = True
            self.type_free(t)
            t.busy = False
            self.tr(f"MPI_Type_free {t.name} rc=ok")
        elif a == A_REENTER:
            if k.reentered == 0:
                self.tr("reenter rc=ERR_OTHER")
            k.reentered += 1

    # ---- the library's cache ----
    def set_value(self, o, k, v):
        old = o.attrs.get(k.idx)
        self.seq += 1
        if old is not None:
            rc = self.delete(k, o, old[0])
            if rc != "ok":
                return rc
            old[0], old[2] = v, self.seq
        else:
            o.attrs[k.idx] = [v, self.seq, self.seq]
        return "ok"

    def delete_all(self, o):
        """Delete callbacks of every attribute of o, in no particular order (the trace sorts them)."""
        for kidx in list(o.attrs):
            v = o.attrs[kidx][0]
            self.delete(self.keys[kidx], o, v)
            o.attrs.pop(kidx, None)

    def copy_all(self, src, dst):
        for kidx in list(src.attrs):
            k = self.keys[kidx]
            f, out, rc = self.copy(k, src, src.attrs[kidx][0])
            if rc != "ok":
                return rc
            if f:
                self.seq += 1
                dst.attrs[kidx] = [out, self.seq, self.seq]
        return "ok"

    def type_free(self, o):
        o.live, o.dead = False, True
        if self.b.type_free_defers and o.holders > 0:
            return
        self.type_destroy(o)

    def type_destroy(self, o):
        self.delete_all(o)
        for s in o.sources:
            s.holders -= 1
            if self.b.type_free_defers and s.dead and s.holders == 0:
                self.type_destroy(s)
        o.sources = []

    # ---- legality (what the generator and the shrinker keep to) ----
    def legal(self, op):
        t = op["op"]
        K = self.keys
        O = self.objs
        if t == "kv_create":
            return not K[op["k"]].made
        if t in ("kv_free", "seed_double_free"):
            return K[op["k"]].made and K[op["k"]].live and (not op.get("deprecated") or K[op["k"]].spec.get("deprecated") or K[op["k"]].kind == K_COMM)
        if t in ("set", "get"):
            o, k = O[op["o"]], K[op["k"]]
            return o.live and k.made and k.live and o.kind == k.kind and (not op.get("deprecated") or o.kind == K_COMM)
        if t == "delete":
            o, k = O[op["o"]], K[op["k"]]
            return (o.live and k.made and o.kind == k.kind and k.idx in o.attrs
                    and (not op.get("deprecated") or o.kind == K_COMM))
        if t == "comm_new":
            return O[op["src"]].live and O[op["src"]].kind == K_COMM and not O[op["dst"]].live and not O[op["dst"]].dead
        if t == "type_new":
            src_ok = op["src"] < 0 or (O[op["src"]].live and O[op["src"]].kind == K_TYPE)
            return src_ok and not O[op["dst"]].live and not O[op["dst"]].dead
        if t == "win_new":
            return O[op["c"]].live and O[op["c"]].kind == K_COMM and not O[op["w"]].live and not O[op["w"]].dead
        if t in ("comm_free", "type_free", "win_free"):
            return op["o"] >= 2 and O[op["o"]].live
        if t == "seed_delete_absent":
            o, k = O[op["o"]], K[op["k"]]
            return o.live and k.made and k.live and o.kind == k.kind and k.idx not in o.attrs
        if t == "seed_kind_mismatch":
            o, k = O[op["o"]], K[op["k"]]
            return o.live and k.made and k.live and o.kind != k.kind
        if t == "seed_freed":
            o, k = O[op["o"]], K[op["k"]]
            return o.live and k.made and not k.live and o.kind == k.kind
        if t in ("seed_unknown", "seed_invalid", "seed_null_flag"):
            o = O[op["o"]]
            if t == "seed_null_flag":
                k = K[op["k"]]
                return o.live and o.kind == K_COMM and k.made and k.live and k.kind == K_COMM
            return o.live
        return True  # seeds without operands

    # ---- execution ----
    def run(self, ops):
        """The trace of `ops` (a whole program: body, epilogue and its MPI_Finalize)."""
        self.lines = [f"# size {self.size} rank {self.rank}"]
        for i, op in enumerate(ops):
            self.apply(i, op)
        return self.lines

    def apply(self, i, op):
        t = op["op"]
        K, O = self.keys, self.objs
        depr = bool(op.get("deprecated"))
        if t == "kv_create":
            k = K[op["k"]]
            k.made = k.live = True
            name = "MPI_Keyval_create" if k.spec.get("deprecated") else CREATE_KV[k.kind]
            self.tr(f"{i} {name} {k.name} rc=ok")
        elif t == "kv_free":
            k = K[op["k"]]
            name = "MPI_Keyval_free" if depr else FREE_KV[k.kind]
            if not k.made or not k.live:
                self.tr(f"{i} skip {name} {k.name}")
                return
            k.live = False
            self.tr(f"{i} {name} {k.name} rc=ok")
        elif t == "set":
            o, k = O[op["o"]], K[op["k"]]
            name = "MPI_Attr_put" if depr else SET[o.kind]
            if not o.live or not k.made or not k.live:
                self.tr(f"{i} skip {name} {o.name} {k.name}")
                return
            v = op["v"] + 1000 * self.rank
            o.busy = True
            rc = self.set_value(o, k, v)
            o.busy = False
            self.tr(f"{i} {name} {o.name} {k.name} v={v} rc={rc}")
        elif t == "get":
            o, k = O[op["o"]], K[op["k"]]
            name = "MPI_Attr_get" if depr else GET[o.kind]
            if not o.live or not k.made or not k.live:
                self.tr(f"{i} skip {name} {o.name} {k.name}")
                return
            a = o.attrs.get(k.idx)
            self.tr(f"{i} {name} {o.name} {k.name} rc=ok flag={1 if a else 0} v={a[0] if a else 0}")
        elif t == "delete":
            o, k = O[op["o"]], K[op["k"]]
            name = "MPI_Attr_delete" if depr else DEL[o.kind]
            if not o.live or not k.made:
                self.tr(f"{i} skip {name} {o.name} {k.name}")
                return
            a = o.attrs.get(k.idx)
            rc = "ok"
            if a is not None:
                o.busy = True
                rc = self.delete(k, o, a[0])
                o.busy = False
                if rc == "ok":
                    o.attrs.pop(k.idx, None)
            self.tr(f"{i} {name} {o.name} {k.name} rc={rc}")
        elif t == "comm_new":
            src, dst, how = O[op["src"]], O[op["dst"]], op["how"]
            if not src.live:
                self.tr(f"{i} skip {COMM_NEW[how]} {src.name} {dst.name}")
                return
            rc = "ok"
            src.busy = True
            if how <= 1:
                rc = self.copy_all(src, dst)
            src.busy = False
            if rc == "ok":
                dst.live = True
            else:
                dst.attrs = {}
            self.tr(f"{i} {COMM_NEW[how]} {src.name} {dst.name} rc={rc}")
        elif t == "comm_free":
            o = O[op["o"]]
            if not o.live:
                self.tr(f"{i} skip MPI_Comm_free {o.name}")
                return
            o.busy = True
            self.delete_all(o)
            o.busy = False
            o.live, o.dead = False, True
            self.tr(f"{i} MPI_Comm_free {o.name} rc=ok")
        elif t == "type_new":
            dst, how = O[op["dst"]], op["how"]
            src = O[op["src"]] if op["src"] >= 0 else None
            frm = src.name if src else "int"
            if src is not None and not src.live:
                self.tr(f"{i} skip {TYPE_NEW[how]} {frm} {dst.name}")
                return
            rc = "ok"
            if src is not None:
                src.busy = True
                if how == 2:
                    rc = self.copy_all(src, dst)
                src.busy = False
                if rc == "ok":
                    src.holders += 1
                    dst.sources = [src]
            if rc == "ok":
                dst.live = True
            self.tr(f"{i} {TYPE_NEW[how]} {frm} {dst.name} rc={rc}")
        elif t == "type_free":
            o = O[op["o"]]
            if not o.live:
                self.tr(f"{i} skip MPI_Type_free {o.name}")
                return
            o.busy = True
            self.type_free(o)
            o.busy = False
            self.tr(f"{i} MPI_Type_free {o.name} rc=ok")
        elif t == "win_new":
            c, w, how = O[op["c"]], O[op["w"]], op["how"]
            if not c.live:
                self.tr(f"{i} skip {WIN_NEW[how]} {c.name} {w.name}")
                return
            c.busy = True
            if self.b.win_internal_dup:
                w.internal = Obj(-1, "internal", K_COMM)
                w.internal.live = True
                self.copy_all(c, w.internal)
            c.busy = False
            w.live = True
            self.tr(f"{i} {WIN_NEW[how]} {c.name} {w.name} rc=ok base=ok")
        elif t == "win_free":
            o = O[op["o"]]
            if not o.live:
                self.tr(f"{i} skip MPI_Win_free {o.name}")
                return
            o.busy = True
            self.delete_all(o)
            if o.internal is not None:
                self.delete_all(o.internal)
                o.internal = None
            o.busy = False
            o.live, o.dead = False, True
            self.tr(f"{i} MPI_Win_free {o.name} rc=ok")
        elif t == "finalize":
            self_ = O[1]
            order = 1 if self.b.self_first_set_order else 2
            for kidx in sorted(self_.attrs, key=lambda x: -self_.attrs[x][order]):
                if kidx in self_.attrs:
                    self.delete(K[kidx], self_, self_.attrs[kidx][0])
                    self_.attrs.pop(kidx, None)
            if self.b.world_deleted_at_finalize:
                self.delete_all(O[0])
            self.tr(f"{i} MPI_Finalize rc=ok")
        # seeded errors: only their effect on the program's own state matters
        elif t == "seed_double_free":
            K[op["k"]].live = False
            self.tr(f"{i} double-free {K[op['k']].name}")
        elif t == "seed_delete_absent":
            o, k = O[op["o"]], K[op["k"]]
            self.tr(f"{i} {DEL[o.kind]} {o.name} {k.name}")
        else:
            self.tr(f"{i} {t}")
