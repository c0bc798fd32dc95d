/* The runtime every program of the differential fuzzer carries (tests/fuzz/prelude.c, inlined by
 * cemit.py after the program's NK / NO and before its tables and main).
 *
 * The program prints its trace to ARGV[1].RANK: one line per call the program makes (its op
 * index, the MPI call, the logical names of its object and keyval, the return code's class, the
 * flag and value) and one per user callback run (copy / delete, the object it ran for as the
 * program knows it or "internal", the keyval, value in, flag and value out, what it returned).
 * Lines are indented by callback depth. Handles and keyval numbers never appear: they differ
 * between a native run and runs under attrcheck.
 *
 * Every keyval's callbacks get its KV record as extra_state, which says what they do: copy,
 * decline or transform the value, fail once, set a bad flag; and an action they take when called
 * directly from one of the program's calls (depth 1): free their own or another keyval, set an
 * attribute on another object, create and free objects of their own, free a victim datatype, or
 * (a seeded error) set an attribute on their own object. Each action checks at run time what the
 * program knows (the keyval or object is live, the target is not the callback's own object nor
 * one the current call is working on), so the program stays legal whatever the library runs. */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_COMM = 0, K_TYPE = 1, K_WIN = 2 };
enum { C_NULL = 0, C_DUP = 1, C_DECLINE = 2, C_COPY = 3, C_TRANSFORM = 4, C_BADFLAG = 5, C_FAIL = 6 };
enum { D_NULL = 0, D_OK = 1, D_FAIL = 2 };
enum { A_NONE = 0, A_FREE_OWN = 1, A_FREE_KEY = 2, A_SET_OTHER = 3, A_TMP_TYPE = 4, A_TMP_COMM = 5,
       A_FREE_OBJ = 6, A_REENTER = 7 };
enum { W_COPY = 1, W_DELETE = 2 };

typedef struct {
  const char *name;
  int kind, copy, del, act, when, arg, aux, deprecated, depconst;
  int sets, failed, reentered;
} KV;
typedef struct {
  const char *name;
  int kind, live, dead;
  MPI_Comm c;
  MPI_Datatype t;
  MPI_Win w;
  void *mem;
} OBJ;

static KV kv[NK];
static OBJ ob[NO];
static int kh[NK], klive[NK], kmade[NK], busy[NO];
static int depth, rank;
static FILE *T;

static void tr(const char *fmt, ...) {
  if (!T) return;
  va_list ap;
  for (int i = 0; i < depth; i++) fputs("  ", T);
  va_start(ap, fmt);
  vfprintf(T, fmt, ap);
  va_end(ap);
  fputc('\n', T);
  fflush(T);
}

static const char *cls(int rc) {
  int c;
  if (rc == MPI_SUCCESS) return "ok";
  if (MPI_Error_class(rc, &c) != MPI_SUCCESS) return "ERR?";
  if (c == MPI_ERR_KEYVAL) return "ERR_KEYVAL";
  if (c == MPI_ERR_OTHER) return "ERR_OTHER";
  if (c == MPI_ERR_ARG) return "ERR_ARG";
  if (c == MPI_ERR_COMM) return "ERR_COMM";
  if (c == MPI_ERR_TYPE) return "ERR_TYPE";
  if (c == MPI_ERR_WIN) return "ERR_WIN";
  return "ERR";
}

#define V(p) ((long)(intptr_t)(p))
#define P(v) ((void *)(intptr_t)(v))

static const char *comm_name(MPI_Comm c) {
  if (c == MPI_COMM_WORLD) return "world";
  if (c == MPI_COMM_SELF) return "self";
  for (int i = 2; i < NO; i++)
    if (ob[i].kind == K_COMM && ob[i].live && ob[i].c == c) return ob[i].name;
  return "internal";
}
static const char *type_name(MPI_Datatype t) {
  for (int i = 2; i < NO; i++)
    if (ob[i].kind == K_TYPE && ob[i].live && ob[i].t == t) return ob[i].name;
  /* a datatype the program freed whose delete callbacks the library held back */
  for (int i = 2; i < NO; i++)
    if (ob[i].kind == K_TYPE && ob[i].dead && ob[i].t == t) return ob[i].name;
  return "internal";
}
static const char *win_name(MPI_Win w) {
  for (int i = 2; i < NO; i++)
    if (ob[i].kind == K_WIN && ob[i].live && ob[i].w == w) return ob[i].name;
  return "internal";
}
static int same(int o, int kind, const void *self) {
  if (ob[o].kind != kind) return 0;
  if (kind == K_COMM) return ob[o].c == *(const MPI_Comm *)self;
  if (kind == K_TYPE) return ob[o].t == *(const MPI_Datatype *)self;
  return ob[o].w == *(const MPI_Win *)self;
}

static const char *set_name(int kind, int depr) {
  if (depr) return "MPI_Attr_put";
  return kind == K_COMM ? "MPI_Comm_set_attr" : kind == K_TYPE ? "MPI_Type_set_attr" : "MPI_Win_set_attr";
}
static const char *get_name(int kind, int depr) {
  if (depr) return "MPI_Attr_get";
  return kind == K_COMM ? "MPI_Comm_get_attr" : kind == K_TYPE ? "MPI_Type_get_attr" : "MPI_Win_get_attr";
}
static const char *del_name(int kind, int depr) {
  if (depr) return "MPI_Attr_delete";
  return kind == K_COMM ? "MPI_Comm_delete_attr" : kind == K_TYPE ? "MPI_Type_delete_attr" : "MPI_Win_delete_attr";
}
static int set_attr(int o, int key, long v, int depr) {
  if (depr) return MPI_Attr_put(ob[o].c, key, P(v));
  if (ob[o].kind == K_COMM) return MPI_Comm_set_attr(ob[o].c, key, P(v));
  if (ob[o].kind == K_TYPE) return MPI_Type_set_attr(ob[o].t, key, P(v));
  return MPI_Win_set_attr(ob[o].w, key, P(v));
}
static int get_attr(int o, int key, void *val, int *flag, int depr) {
  if (depr) return MPI_Attr_get(ob[o].c, key, val, flag);
  if (ob[o].kind == K_COMM) return MPI_Comm_get_attr(ob[o].c, key, val, flag);
  if (ob[o].kind == K_TYPE) return MPI_Type_get_attr(ob[o].t, key, val, flag);
  return MPI_Win_get_attr(ob[o].w, key, val, flag);
}
static int del_attr(int o, int key, int depr) {
  if (depr) return MPI_Attr_delete(ob[o].c, key);
  if (ob[o].kind == K_COMM) return MPI_Comm_delete_attr(ob[o].c, key);
  if (ob[o].kind == K_TYPE) return MPI_Type_delete_attr(ob[o].t, key);
  return MPI_Win_delete_attr(ob[o].w, key);
}
static int free_keyval(int k, int *key, int depr) {
  if (depr) return MPI_Keyval_free(key);
  if (kv[k].kind == K_COMM) return MPI_Comm_free_keyval(key);
  if (kv[k].kind == K_TYPE) return MPI_Type_free_keyval(key);
  return MPI_Win_free_keyval(key);
}
static const char *free_keyval_name(int k, int depr) {
  if (depr) return "MPI_Keyval_free";
  return kv[k].kind == K_COMM ? "MPI_Comm_free_keyval" : kv[k].kind == K_TYPE ? "MPI_Type_free_keyval" : "MPI_Win_free_keyval";
}

/* A datatype made now may take the handle of one freed before: that one is gone for good. */
static void type_made(int o) {
  for (int i = 2; i < NO; i++)
    if (i != o && ob[i].kind == K_TYPE && ob[i].dead && ob[i].t == ob[o].t) ob[i].dead = 0;
}

static void free_key_action(int j) {
  if (!kmade[j] || !klive[j]) { tr("skip %s %s", free_keyval_name(j, 0), kv[j].name); return; }
  int t = kh[j];
  int rc = free_keyval(j, &t, 0);
  klive[j] = 0;
  tr("%s %s rc=%s", free_keyval_name(j, 0), kv[j].name, cls(rc));
}

static void act(KV *k, int kind, const void *self) {
  int rc, o = k->arg;
  switch (k->act) {
  case A_FREE_OWN: free_key_action((int)(k - kv)); break;
  case A_FREE_KEY: free_key_action(o); break;
  case A_SET_OTHER: {
    int a = k->aux;
    if (!ob[o].live || busy[o] || same(o, kind, self) || !kmade[a] || !klive[a]) {
      tr("skip %s %s %s", set_name(ob[o].kind, 0), ob[o].name, kv[a].name);
      break;
    }
    long v = 500 + (++k->sets);
    busy[o] = 1;
    rc = set_attr(o, kh[a], v, 0);
    busy[o] = 0;
    tr("%s %s %s v=%ld rc=%s", set_name(ob[o].kind, 0), ob[o].name, kv[a].name, v, cls(rc));
    break;
  }
  case A_TMP_TYPE: {
    MPI_Datatype t;
    rc = MPI_Type_contiguous(2, MPI_INT, &t);
    if (rc == MPI_SUCCESS) rc = MPI_Type_free(&t);
    tr("tmp-type rc=%s", cls(rc));
    break;
  }
  case A_TMP_COMM: {
    MPI_Comm c;
    rc = MPI_Comm_split(MPI_COMM_SELF, 0, 0, &c);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_free(&c);
    tr("tmp-comm rc=%s", cls(rc));
    break;
  }
  case A_FREE_OBJ: {
    if (!ob[o].live || busy[o] || same(o, kind, self)) { tr("skip MPI_Type_free %s", ob[o].name); break; }
    MPI_Datatype t = ob[o].t;
    busy[o] = 1;
    rc = MPI_Type_free(&t);
    busy[o] = 0;
    ob[o].live = 0;
    ob[o].dead = 1;
    tr("MPI_Type_free %s rc=%s", ob[o].name, cls(rc));
    break;
  }
  case A_REENTER: /* seeded error: an attribute call on the callback's own object */
    if (k->reentered++) break;
    if (kind == K_COMM) rc = MPI_Comm_set_attr(*(const MPI_Comm *)self, kh[k - kv], P(1));
    else if (kind == K_TYPE) rc = MPI_Type_set_attr(*(const MPI_Datatype *)self, kh[k - kv], P(1));
    else rc = MPI_Win_set_attr(*(const MPI_Win *)self, kh[k - kv], P(1));
    tr("reenter rc=%s", cls(rc));
    break;
  }
}

static int copy_cb(int kind, const char *obj, const void *self, void *es, void *in, void *out, int *flag) {
  KV *k = es;
  long v = V(in), o = 0;
  int f = 0, rc = MPI_SUCCESS;
  depth++;
  switch (k->copy) {
  case C_DECLINE: f = 0; break;
  case C_COPY: f = 1; o = v; break;
  case C_TRANSFORM: f = 1; o = v + 7; break;
  case C_BADFLAG: f = 2; o = v; break;
  case C_FAIL:
    if (!k->failed) { k->failed = 1; rc = MPI_ERR_OTHER; }
    else { f = 1; o = v; }
    break;
  }
  if (k->act && k->when == W_COPY && depth == 1) act(k, kind, self);
  *flag = f;
  if (f) *(void **)out = P(o);
  tr("cb copy %s %s in=%ld flag=%d out=%ld rc=%s", obj, k->name, v, f, f ? o : 0L, cls(rc));
  depth--;
  return rc;
}
static int del_cb(int kind, const char *obj, const void *self, void *es, void *val) {
  KV *k = es;
  int rc = MPI_SUCCESS;
  depth++;
  if (k->del == D_FAIL && !k->failed) { k->failed = 1; rc = MPI_ERR_OTHER; }
  if (k->act && k->when == W_DELETE && depth == 1) act(k, kind, self);
  tr("cb delete %s %s in=%ld rc=%s", obj, k->name, V(val), cls(rc));
  depth--;
  return rc;
}
static int comm_copy(MPI_Comm c, int key, void *es, void *in, void *out, int *flag) {
  (void)key; return copy_cb(K_COMM, comm_name(c), &c, es, in, out, flag);
}
static int comm_del(MPI_Comm c, int key, void *val, void *es) {
  (void)key; return del_cb(K_COMM, comm_name(c), &c, es, val);
}
static int type_copy(MPI_Datatype t, int key, void *es, void *in, void *out, int *flag) {
  (void)key; return copy_cb(K_TYPE, type_name(t), &t, es, in, out, flag);
}
static int type_del(MPI_Datatype t, int key, void *val, void *es) {
  (void)key; return del_cb(K_TYPE, type_name(t), &t, es, val);
}
static int win_copy(MPI_Win w, int key, void *es, void *in, void *out, int *flag) {
  (void)key; return copy_cb(K_WIN, win_name(w), &w, es, in, out, flag);
}
static int win_del(MPI_Win w, int key, void *val, void *es) {
  (void)key; return del_cb(K_WIN, win_name(w), &w, es, val);
}

/* ---- the program's calls (i: the op's index; o, k: logical object and keyval) ---- */

static void op_kv_create(int i, int k) {
  KV *x = &kv[k];
  int rc;
  const char *name;
  if (x->deprecated) {
    name = "MPI_Keyval_create";
    rc = MPI_Keyval_create(x->copy == C_NULL ? MPI_COMM_NULL_COPY_FN : x->copy == C_DUP ? MPI_COMM_DUP_FN : comm_copy,
                           x->del == D_NULL ? MPI_COMM_NULL_DELETE_FN : comm_del, &kh[k], x);
  } else if (x->kind == K_COMM) {
    name = "MPI_Comm_create_keyval";
#ifdef FUZZ_DEPRECATED_CONSTANTS
    if (x->depconst)
      rc = MPI_Comm_create_keyval(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &kh[k], x);
    else
#endif
    rc = MPI_Comm_create_keyval(x->copy == C_NULL ? MPI_COMM_NULL_COPY_FN : x->copy == C_DUP ? MPI_COMM_DUP_FN : comm_copy,
                                x->del == D_NULL ? MPI_COMM_NULL_DELETE_FN : comm_del, &kh[k], x);
  } else if (x->kind == K_TYPE) {
    name = "MPI_Type_create_keyval";
    rc = MPI_Type_create_keyval(x->copy == C_NULL ? MPI_TYPE_NULL_COPY_FN : x->copy == C_DUP ? MPI_TYPE_DUP_FN : type_copy,
                                x->del == D_NULL ? MPI_TYPE_NULL_DELETE_FN : type_del, &kh[k], x);
  } else {
    name = "MPI_Win_create_keyval";
    rc = MPI_Win_create_keyval(x->copy == C_NULL ? MPI_WIN_NULL_COPY_FN : x->copy == C_DUP ? MPI_WIN_DUP_FN : win_copy,
                               x->del == D_NULL ? MPI_WIN_NULL_DELETE_FN : win_del, &kh[k], x);
  }
  kmade[k] = klive[k] = rc == MPI_SUCCESS;
  tr("%d %s %s rc=%s", i, name, x->name, cls(rc));
}
static void op_kv_free(int i, int k, int depr) {
  if (!kmade[k] || !klive[k]) { tr("%d skip %s %s", i, free_keyval_name(k, depr), kv[k].name); return; }
  int t = kh[k];
  int rc = free_keyval(k, &t, depr);
  klive[k] = 0;
  tr("%d %s %s rc=%s", i, free_keyval_name(k, depr), kv[k].name, cls(rc));
}
static void op_set(int i, int o, int k, long v, int depr) {
  if (!ob[o].live || !kmade[k] || !klive[k]) { tr("%d skip %s %s %s", i, set_name(ob[o].kind, depr), ob[o].name, kv[k].name); return; }
  long val = v + 1000L * rank;
  busy[o] = 1;
  int rc = set_attr(o, kh[k], val, depr);
  busy[o] = 0;
  tr("%d %s %s %s v=%ld rc=%s", i, set_name(ob[o].kind, depr), ob[o].name, kv[k].name, val, cls(rc));
}
static void op_get(int i, int o, int k, int depr) {
  if (!ob[o].live || !kmade[k] || !klive[k]) { tr("%d skip %s %s %s", i, get_name(ob[o].kind, depr), ob[o].name, kv[k].name); return; }
  void *val = P(-1);
  int flag = -1;
  busy[o] = 1;
  int rc = get_attr(o, kh[k], &val, &flag, depr);
  busy[o] = 0;
  tr("%d %s %s %s rc=%s flag=%d v=%ld", i, get_name(ob[o].kind, depr), ob[o].name, kv[k].name, cls(rc), flag,
     flag == 1 ? V(val) : 0L);
}
static void op_delete(int i, int o, int k, int depr) {
  /* a keyval freed while attributes use it still names them: no klive test */
  if (!ob[o].live || !kmade[k]) { tr("%d skip %s %s %s", i, del_name(ob[o].kind, depr), ob[o].name, kv[k].name); return; }
  busy[o] = 1;
  int rc = del_attr(o, kh[k], depr);
  busy[o] = 0;
  tr("%d %s %s %s rc=%s", i, del_name(ob[o].kind, depr), ob[o].name, kv[k].name, cls(rc));
}
/* how: 0 MPI_Comm_dup, 1 MPI_Comm_idup + MPI_Wait, 2 MPI_Comm_split (one color), 3 split by rank */
static void op_comm_new(int i, int src, int dst, int how) {
  static const char *names[] = {"MPI_Comm_dup", "MPI_Comm_idup+MPI_Wait", "MPI_Comm_split", "MPI_Comm_split(rank)"};
  if (!ob[src].live) { tr("%d skip %s %s %s", i, names[how], ob[src].name, ob[dst].name); return; }
  MPI_Comm c = MPI_COMM_NULL;
  int rc;
  busy[src] = 1;
  if (how == 0) rc = MPI_Comm_dup(ob[src].c, &c);
  else if (how == 1) {
    MPI_Request r;
    rc = MPI_Comm_idup(ob[src].c, &c, &r);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else rc = MPI_Comm_split(ob[src].c, how == 2 ? 0 : rank, 0, &c);
  busy[src] = 0;
  if (rc == MPI_SUCCESS) { ob[dst].c = c; ob[dst].live = 1; }
  tr("%d %s %s %s rc=%s", i, names[how], ob[src].name, ob[dst].name, cls(rc));
}
static void op_comm_free(int i, int o) {
  if (!ob[o].live) { tr("%d skip MPI_Comm_free %s", i, ob[o].name); return; }
  MPI_Comm c = ob[o].c;
  busy[o] = 1;
  int rc = MPI_Comm_free(&c);
  busy[o] = 0;
  if (rc == MPI_SUCCESS) ob[o].live = 0;
  tr("%d MPI_Comm_free %s rc=%s", i, ob[o].name, cls(rc));
}
/* how: 0 MPI_Type_contiguous(1, MPI_INT), 1 MPI_Type_contiguous(2, src), 2 MPI_Type_dup(src) */
static void op_type_new(int i, int src, int dst, int how) {
  static const char *names[] = {"MPI_Type_contiguous(int)", "MPI_Type_contiguous", "MPI_Type_dup"};
  const char *from = src >= 0 ? ob[src].name : "int";
  if (src >= 0 && !ob[src].live) { tr("%d skip %s %s %s", i, names[how], from, ob[dst].name); return; }
  MPI_Datatype t = MPI_DATATYPE_NULL;
  int rc;
  if (src >= 0) busy[src] = 1;
  if (how == 0) rc = MPI_Type_contiguous(1, MPI_INT, &t);
  else if (how == 1) rc = MPI_Type_contiguous(2, ob[src].t, &t);
  else rc = MPI_Type_dup(ob[src].t, &t);
  if (src >= 0) busy[src] = 0;
  if (rc == MPI_SUCCESS) { ob[dst].t = t; ob[dst].live = 1; ob[dst].dead = 0; type_made(dst); }
  tr("%d %s %s %s rc=%s", i, names[how], from, ob[dst].name, cls(rc));
}
static void op_type_free(int i, int o) {
  if (!ob[o].live) { tr("%d skip MPI_Type_free %s", i, ob[o].name); return; }
  MPI_Datatype t = ob[o].t;
  busy[o] = 1;
  int rc = MPI_Type_free(&t);
  busy[o] = 0;
  if (rc == MPI_SUCCESS) { ob[o].live = 0; ob[o].dead = 1; }
  tr("%d MPI_Type_free %s rc=%s", i, ob[o].name, cls(rc));
}
/* how: 0 MPI_Win_create over 64 bytes of the program's, 1 MPI_Win_allocate of 8 bytes. The
 * window's MPI_WIN_BASE is compared with the memory's address: "base=ok" or the difference. */
static void op_win_new(int i, int c, int w, int how) {
  const char *name = how ? "MPI_Win_allocate" : "MPI_Win_create";
  if (!ob[c].live) { tr("%d skip %s %s %s", i, name, ob[c].name, ob[w].name); return; }
  MPI_Win win = MPI_WIN_NULL;
  void *base = NULL;
  int rc;
  busy[c] = 1;
  if (how == 0) {
    base = ob[w].mem = calloc(1, 64);
    rc = MPI_Win_create(base, 64, 1, MPI_INFO_NULL, ob[c].c, &win);
  } else {
    rc = MPI_Win_allocate(8, 1, MPI_INFO_NULL, ob[c].c, &base, &win);
  }
  busy[c] = 0;
  char where[64] = "";
  if (rc == MPI_SUCCESS) {
    void *wb = NULL;
    int flag = 0;
    ob[w].w = win;
    ob[w].live = 1;
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_get_attr(win, MPI_WIN_BASE, &wb, &flag);
    if (!flag) snprintf(where, sizeof where, " base=absent");
    else if (wb == base) snprintf(where, sizeof where, " base=ok");
    else snprintf(where, sizeof where, " base=%+ld", (long)((char *)wb - (char *)base));
  }
  tr("%d %s %s %s rc=%s%s", i, name, ob[c].name, ob[w].name, cls(rc), where);
}
static void op_win_free(int i, int o) {
  if (!ob[o].live) { tr("%d skip MPI_Win_free %s", i, ob[o].name); return; }
  MPI_Win w = ob[o].w;
  busy[o] = 1;
  int rc = MPI_Win_free(&w);
  busy[o] = 0;
  if (rc == MPI_SUCCESS) { ob[o].live = 0; free(ob[o].mem); ob[o].mem = NULL; }
  tr("%d MPI_Win_free %s rc=%s", i, ob[o].name, cls(rc));
}

/* ---- seeded errors: each makes exactly one erroneous call ---- */
static void seed_double_free(int i, int k) {
  if (!kmade[k] || !klive[k]) { tr("%d skip double-free %s", i, kv[k].name); return; }
  int a = kh[k], b = kh[k];
  int rc1 = free_keyval(k, &a, 0);
  int rc2 = free_keyval(k, &b, 0);
  klive[k] = 0;
  tr("%d double-free %s rc=%s,%s", i, kv[k].name, cls(rc1), cls(rc2));
}
static void seed_get_key(int i, int o, int key, const char *what) {
  void *val = NULL;
  int flag = 0;
  int rc = get_attr(o, key, &val, &flag, 0);
  tr("%d %s %s %s rc=%s", i, get_name(ob[o].kind, 0), ob[o].name, what, cls(rc));
}
static void seed_set_predefined(int i) {
  int rc = MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, P(1));
  tr("%d MPI_Comm_set_attr world MPI_TAG_UB rc=%s", i, cls(rc));
}
static void seed_null_handle(int i) {
  void *val = NULL;
  int flag = 0;
  int rc = MPI_Comm_get_attr(MPI_COMM_NULL, MPI_TAG_UB, &val, &flag);
  tr("%d MPI_Comm_get_attr MPI_COMM_NULL rc=%s", i, cls(rc));
}
static void seed_free_predefined(int i) {
  MPI_Datatype t = MPI_INT;
  int rc = MPI_Type_free(&t);
  tr("%d MPI_Type_free MPI_INT rc=%s", i, cls(rc));
}
static void seed_null_flag(int i, int o, int k) {
  void *val = NULL;
  int rc = MPI_Comm_get_attr(ob[o].c, kh[k], &val, NULL);
  tr("%d MPI_Comm_get_attr %s %s flag=NULL rc=%s", i, ob[o].name, kv[k].name, cls(rc));
}
static void seed_before_init(void) {
  int k = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL);
}
static void seed_after_finalize(void) {
  int k = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL);
}

static void start(int *argc, char ***argv) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING], path[4096];
  int len = 0, size = 0;
  MPI_Init(argc, argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  snprintf(path, sizeof path, "%s.%d", *argc > 1 ? (*argv)[1] : "trace", rank);
  T = fopen(path, "w");
  if (!T) { perror(path); MPI_Abort(MPI_COMM_WORLD, 3); }
  MPI_Get_library_version(v, &len);
  v[strcspn(v, "\n\r")] = 0;
  tr("# library %s", v);
  tr("# size %d rank %d", size, rank);
  ob[0].name = "world"; ob[0].kind = K_COMM; ob[0].live = 1; ob[0].c = MPI_COMM_WORLD;
  ob[1].name = "self"; ob[1].kind = K_COMM; ob[1].live = 1; ob[1].c = MPI_COMM_SELF;
}
static void finish(int i) {
  int rc = MPI_Finalize();
  tr("%d MPI_Finalize rc=%s", i, rc == MPI_SUCCESS ? "ok" : "ERR");
}
