// Randomized model-based test of attrcheck::Engine.
//
// A deliberately simple reference implementation of docs/engine.md (std::map / std::vector, no
// cleverness) and the engine are driven with the same random operations. User callbacks are test
// functions with the engine-native signatures (called by the default NativeInvoker); what they do
// (fail, throw, copy flag, value out, one nested engine call) is set per operation by a Script
// shared by both runs, and nested calls go to "the implementation under test" through a global
// pointer. After every step the results, outputs and the exact trace of callback calls, nested
// results and Observer events must agree; every kCheckEvery steps the whole visible state
// (attributes, objects, keyvals) is compared.
//
// Reproduce a failure with --gtest_filter='Seeds/EngineModel.*/<seed>' (with
// ATTRCHECK_MODEL_CHECK_EVERY=1 the state is compared after every step, to bisect a state
// difference): the message names the step and prints the last operations with their scripts.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attrcheck/engine.hpp"

namespace {

using namespace attrcheck;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define MODEL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define MODEL_SANITIZED 1
#endif
#endif
#ifdef MODEL_SANITIZED
constexpr int kSeeds = 10, kOpsPerSeed = 10000;  // 100k operations
#else
constexpr int kSeeds = 40, kOpsPerSeed = 50000;  // 2M operations, a few seconds
#endif
constexpr int kCheckEvery = 1000;

// ---------------------------------------------------------------------------------------------
// Values and small helpers
// ---------------------------------------------------------------------------------------------

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}
std::string hex(std::uint64_t v) { return fmt("0x%" PRIx64, v); }
std::uint64_t word_of(const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }
void* ptr_of(std::uint64_t w) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(w)); }
std::uint64_t sext32(std::uint64_t v) {
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(static_cast<std::uint32_t>(v))));
}
std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Every value ever stored with the C representation comes from this palette. None of them can be
// the address of an aligned int32/int64 cell (< 4096, odd, 2 mod 4, or >= 2^56), so the test can
// tell "address" from "pointer to a Fortran-set integer" before dereferencing anything.
constexpr std::uint64_t kPalette[] = {
    0, 1, 2, 3, 7, 42, 100, 4095, ~0ull, ~1ull, ~41ull, 0x7FFFFFFFull, 0x80000001ull, 0xFFFFFFFFull,
    0x100000001ull, 0x123456789ABDull, 0xFFFFFFFF80000000ull, 0x8000000000000000ull,
    0xDEADBEEFCAFEF00Dull, 0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFF7FFFFFFFull};
constexpr std::size_t kPaletteSize = std::size(kPalette);
bool in_palette(std::uint64_t v) { return std::find(std::begin(kPalette), std::end(kPalette), v) != std::end(kPalette); }
// A C read (or C callback) of an attribute set as `repr` gets a pointer to an integer this wide.
int width_of(Binding repr) { return repr == Binding::FortranAint ? 64 : repr == Binding::FortranInt ? 32 : 0; }
bool plausible_pointer(std::uint64_t w, int width) { return !in_palette(w) && w % static_cast<unsigned>(width / 8) == 0; }
std::uint64_t load(const void* p, int width) {  // the integer at p, sign-extended
  std::int64_t v64 = 0;
  std::int32_t v32 = 0;
  if (width == 64) return std::memcpy(&v64, p, sizeof v64), static_cast<std::uint64_t>(v64);
  return std::memcpy(&v32, p, sizeof v32), sext32(static_cast<std::uint32_t>(v32));
}

using ObjKey = std::pair<int, Handle>;
ObjKey key(ObjectKind kind, Handle h) { return {static_cast<int>(kind), h}; }
Result res(Status s, int rc = 0) { return Result{s, rc}; }
std::string str(Result r) {
  return to_string(r.status) + (r.status == Status::CallbackFailed ? "(" + std::to_string(r.callback_rc) + ")" : "");
}
bool same(Result a, Result b) {  // an invoker that threw has no meaningful rc
  return a.status == b.status && (a.status == Status::CallbackThrew || a.callback_rc == b.callback_rc);
}

// ---------------------------------------------------------------------------------------------
// The trace: callback calls, nested-call results and Observer events, in order
// ---------------------------------------------------------------------------------------------

enum class NestedOp : std::uint8_t { None, Set, Delete, Get, FreeObject, FreeKeyval };
const char* const kNestedNames[] = {"none", "set_attr", "delete_attr", "get_attr", "free_object", "free_keyval"};

struct Ev {
  // CopyCall/DeleteCall: a = how a C callback got its value (0 address, 32/64 via int32*/int64*),
  //   b = anomaly (1 not the call the reference made, 2 address where a pointer was due, 3 unknown
  //   keyval), v1 = the value seen, v2 = extra_state.
  // Nested: a = NestedOp, b = binding, c = status, rc = callback_rc, flag/v1/v2 = get's flag,
  //   value, truncated (free_keyval: v1 = the id afterwards).
  // Obs: a = which, b = cause, c = kind, rc and flag (copies) unless v1 = threw.
  enum Type : std::uint8_t { CopyCall, DeleteCall, Nested, Obs } type;
  std::uint8_t a = 0, b = 0, c = 0;
  Handle obj;
  KeyvalId kv;
  int rc = 0, flag = 0;
  std::uint64_t v1 = 0, v2 = 0;
  Ev(Type t, Handle o, KeyvalId k) : type(t), obj(o), kv(k) {}
  auto tie() const { return std::tie(type, a, b, c, obj, kv, rc, flag, v1, v2); }
  bool operator==(const Ev& o) const { return tie() == o.tie(); }
  bool operator!=(const Ev& o) const { return !(*this == o); }
  std::string text() const {
    static const char* const anomaly[] = {"", " [not the call the reference made]",
                                          " [address where a pointer was due]", " [unknown keyval]"};
    if (type == CopyCall || type == DeleteCall)
      return fmt("%s-call obj=0x%" PRIx64 " kv=%d value=0x%" PRIx64 "%s extra=0x%" PRIx64 "%s",
                 type == CopyCall ? "copy" : "delete", obj, kv, v1,
                 a == 64 ? " (via int64*)" : a == 32 ? " (via int32*)" : "", v2, anomaly[b & 3]);
    if (type == Nested)
      return fmt("  nested %s(%s) obj=0x%" PRIx64 " kv=%d -> %s rc=%d flag=%d v=0x%" PRIx64 " v2=%" PRIu64,
                 kNestedNames[a], to_string(static_cast<Binding>(b)), obj, kv, to_string(static_cast<Status>(c)),
                 rc, flag, v1, v2);
    return fmt("observer %s cause=%s %s obj=0x%" PRIx64 " kv=%d rc=%d flag=%d threw=%d", a == 0 ? "copy" : "delete",
               to_string(static_cast<CallbackCause>(b)), to_string(static_cast<ObjectKind>(c)), obj, kv, rc, flag,
               static_cast<int>(v1));
  }
};

// ---------------------------------------------------------------------------------------------
// Scripts and the callbacks
// ---------------------------------------------------------------------------------------------

struct Nested {
  NestedOp op = NestedOp::None;
  bool own_object = false;  // the object the callback runs for (must be refused: Reentrant)
  bool own_keyval = false;  // the callback's keyval
  ObjectKind kind = ObjectKind::Comm;
  Handle h = 0;
  KeyvalId kv = 0;
  Binding b = Binding::C;
  std::uint64_t value = 0;
};

// What the callbacks do during one operation, indexed by the invocation count within it.
struct Script {
  static constexpr int kN = 8;
  std::array<int, kN> rc{};
  std::array<int, kN> flag{1, 1, 1, 1, 1, 1, 1, 1};  // copy callbacks' flag (7: "anything else")
  std::array<bool, kN> throws{};
  std::uint64_t salt = 0;  // value_out = f(value_in, salt, invocation)
  int nested_at = -1;      // only done by a callback not itself run from a nested call
  Nested nested;
  int rc_at(int i) const { return i < kN ? rc[static_cast<std::size_t>(i)] : 0; }
  int flag_at(int i) const { return i < kN ? flag[static_cast<std::size_t>(i)] : 1; }
  bool throws_at(int i) const { return i < kN && throws[static_cast<std::size_t>(i)]; }
};

struct Hint { Ev::Type which; Handle obj; KeyvalId kv; int width; };  // the reference's callback call i
struct KvMeta { ObjectKind kind; Binding lang; };

class Impl;
struct Ctx {
  Impl* impl = nullptr;  // the implementation under test: nested calls go there
  const Script* script = nullptr;
  std::vector<Ev>* trace = nullptr;
  bool reference = false;
  int calls = 0, depth = 0, pending_width = 0;
  std::vector<Hint> hints;                       // filled by the reference run
  const std::vector<Hint>* ref_hints = nullptr;  // read by the engine run
  std::unordered_map<KeyvalId, KvMeta> meta;     // every user keyval created (same ids in both)
};
Ctx g;
const Script kNoScript;
std::vector<Ev> g_sink;

struct CallbackThrow {};
struct DepthGuard {
  DepthGuard() { ++g.depth; }
  ~DepthGuard() { --g.depth; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

void record_event(const CallbackEvent& e) {
  Ev ev(Ev::Obs, e.object, e.keyval);
  ev.a = static_cast<std::uint8_t>(e.which);
  ev.b = static_cast<std::uint8_t>(e.cause);
  ev.c = static_cast<std::uint8_t>(e.kind);
  ev.v1 = e.threw;
  ev.rc = e.threw ? 0 : e.rc;
  ev.flag = !e.threw && e.which == CallbackEvent::Which::Copy ? e.flag : 0;
  g.trace->push_back(ev);
}

// The value a callback was given, independent of where the implementation keeps it. A C
// callback of a Fortran-set attribute gets a pointer; the reference run says which width.
std::uint64_t seen_value(int idx, Ev& ev, void* in) {
  const std::uint64_t word = word_of(in);
  int width = 0;
  if (g.reference) {
    width = g.pending_width;
    g.hints.push_back({ev.type, ev.obj, ev.kv, width});
  } else {
    const auto i = static_cast<std::size_t>(idx);
    const Hint* h = g.ref_hints && i < g.ref_hints->size() ? &(*g.ref_hints)[i] : nullptr;
    if (!h || h->which != ev.type || h->obj != ev.obj || h->kv != ev.kv) return ev.b = 1, word;
    width = h->width;
  }
  const auto m = g.meta.find(ev.kv);
  if (m == g.meta.end()) return ev.b = 3, word;
  if (m->second.lang != Binding::C || width == 0) return word;  // Fortran: the integer (FortranInt sign-extended)
  if (!plausible_pointer(word, width)) return ev.b = 2, word;
  ev.a = static_cast<std::uint8_t>(width);
  return load(in, width);
}

void maybe_nested(int idx, Handle obj, KeyvalId cb_kv);

// Common part of both callbacks: record the call, then do the scripted nested call.
Ev enter(int idx, Ev::Type type, Handle obj, KeyvalId kv, void* value, void* extra_state) {
  Ev ev(type, obj, kv);
  ev.v2 = word_of(extra_state);
  ev.v1 = seen_value(idx, ev, value);
  g.trace->push_back(ev);
  maybe_nested(idx, obj, kv);
  return ev;
}

int test_copy(Handle old_object, int keyval, void* extra_state, void* in, void* out, int* flag) {
  const int idx = g.calls++;
  DepthGuard depth;
  const Ev ev = enter(idx, Ev::CopyCall, old_object, keyval, in, extra_state);
  const auto m = g.meta.find(keyval);
  const Binding lang = m == g.meta.end() ? Binding::C : m->second.lang;
  const std::uint64_t x = mix(ev.v1 ^ g.script->salt ^ static_cast<std::uint64_t>(idx));
  std::uint64_t v = x;  // FortranAint: anything
  if (lang == Binding::C) v = kPalette[x % kPaletteSize];
  if (lang == Binding::FortranAint && (x >> 8) % 3 == 0) v = x % 101 - 50;
  if (lang == Binding::FortranInt) v = sext32(x);
  std::memcpy(out, &v, sizeof v);
  *flag = g.script->flag_at(idx);
  if (g.script->throws_at(idx)) throw CallbackThrow{};
  return g.script->rc_at(idx);
}

int test_delete(Handle object, int keyval, void* value, void* extra_state) {
  const int idx = g.calls++;
  DepthGuard depth;
  enter(idx, Ev::DeleteCall, object, keyval, value, extra_state);
  if (g.script->throws_at(idx)) throw CallbackThrow{};
  return g.script->rc_at(idx);
}

// ---------------------------------------------------------------------------------------------
// The interface both implementations are driven through
// ---------------------------------------------------------------------------------------------

class Impl {
 public:
  virtual ~Impl() = default;
  virtual Result create_keyval(const KeyvalSpec& spec, KeyvalId* k) = 0;
  virtual Result free_keyval(ObjectKind kind, KeyvalId* k) = 0;
  virtual Result create_object(ObjectKind kind, Handle h, std::uint8_t flags) = 0;
  virtual Result dup_object(ObjectKind kind, Handle old_h, Handle new_h) = 0;
  virtual Result free_object(ObjectKind kind, Handle h) = 0;
  virtual Result set_attr(ObjectKind kind, Handle h, KeyvalId k, Binding from, std::uint64_t v) = 0;
  virtual Result get_attr(ObjectKind kind, Handle h, KeyvalId k, Binding as, void* val, int* flag, bool* trunc) = 0;
  virtual Result delete_attr(ObjectKind kind, Handle h, KeyvalId k) = 0;
  virtual FinalizeReport finalize(const FinalizeOptions& options) = 0;
};

void maybe_nested(int idx, Handle obj, KeyvalId cb_kv) {
  const Nested& n = g.script->nested;
  if (g.depth != 1 || idx != g.script->nested_at || n.op == NestedOp::None || !g.impl) return;
  const auto m = g.meta.find(cb_kv);
  const ObjectKind kind = n.own_object && m != g.meta.end() ? m->second.kind : n.kind;
  Ev ev(Ev::Nested, n.own_object ? obj : n.h, n.own_keyval ? cb_kv : n.kv);
  ev.a = static_cast<std::uint8_t>(n.op);
  ev.b = static_cast<std::uint8_t>(n.b);
  Result r;
  KeyvalId k = ev.kv;
  alignas(8) unsigned char buf[8];
  int flag = -3;
  bool trunc = false;
  switch (n.op) {
    case NestedOp::Set: r = g.impl->set_attr(kind, ev.obj, ev.kv, n.b, n.value); break;
    case NestedOp::Delete: r = g.impl->delete_attr(kind, ev.obj, ev.kv); break;
    case NestedOp::FreeObject: r = g.impl->free_object(kind, ev.obj); break;
    case NestedOp::FreeKeyval:
      r = g.impl->free_keyval(kind, &k);
      ev.v1 = static_cast<std::uint64_t>(k);
      break;
    case NestedOp::Get:  // Fortran reads only: nothing to dereference
      std::memset(buf, 0xA5, sizeof buf);
      r = g.impl->get_attr(kind, ev.obj, ev.kv, n.b, buf, &flag, &trunc);
      if (r.ok()) {
        ev.flag = flag;
        ev.v2 = trunc;
        ev.v1 = n.b == Binding::FortranInt && flag ? load(buf, 32) : load(buf, 64);
      }
      break;
    case NestedOp::None: break;
  }
  ev.c = static_cast<std::uint8_t>(r.status);
  ev.rc = r.status == Status::CallbackThrew ? 0 : r.callback_rc;
  g.trace->push_back(ev);
}

class EngineImpl final : public Impl {
 public:
  explicit EngineImpl(Engine* e) : e_(e) {}
  Result create_keyval(const KeyvalSpec& spec, KeyvalId* k) override { return e_->create_keyval(spec, k); }
  Result free_keyval(ObjectKind kind, KeyvalId* k) override { return e_->free_keyval(kind, k); }
  Result create_object(ObjectKind kind, Handle h, std::uint8_t f) override { return e_->create_object(kind, h, f); }
  Result dup_object(ObjectKind kind, Handle o, Handle n) override { return e_->dup_object(kind, o, n); }
  Result free_object(ObjectKind kind, Handle h) override { return e_->free_object(kind, h); }
  Result set_attr(ObjectKind kind, Handle h, KeyvalId k, Binding b, std::uint64_t v) override {
    return e_->set_attr(kind, h, k, b, v);
  }
  Result get_attr(ObjectKind kind, Handle h, KeyvalId k, Binding as, void* val, int* flag, bool* trunc) override {
    return e_->get_attr(kind, h, k, as, val, flag, trunc);
  }
  Result delete_attr(ObjectKind kind, Handle h, KeyvalId k) override { return e_->delete_attr(kind, h, k); }
  FinalizeReport finalize(const FinalizeOptions& o) override { return e_->finalize(o); }

 private:
  Engine* e_;
};

struct RecordingObserver final : Observer {
  void on_callback(const CallbackEvent& e) override { record_event(e); }
};

// ---------------------------------------------------------------------------------------------
// The reference model: docs/engine.md, rule by rule
// ---------------------------------------------------------------------------------------------

struct RefKeyval {
  KeyvalSpec spec;  // spec.kind is the keyval's kind (predefined ones too)
  bool predefined = false, copy_on_dup = false, user_freed = false, destroyed = false;
  std::string name;
  std::uint32_t attributes = 0;
};
struct RefAttr {
  KeyvalId keyval = 0;
  Binding repr = Binding::C;
  std::uint64_t word = 0;  // Fortran values sign-extended
  bool predefined = false;
  std::int64_t cell64 = 0;  // what a C read of a Fortran-set value points to
  std::int32_t cell32 = 0;
  void* c_read() {  // what a C read returns: the address, or a pointer to the integer
    if (repr == Binding::C) return ptr_of(word);
    return repr == Binding::FortranAint ? static_cast<void*>(&cell64) : static_cast<void*>(&cell32);
  }
};
struct RefObject {
  std::uint8_t flags = 0;
  std::vector<RefAttr> attrs;  // set order: oldest first
};

class Reference final : public Impl {
 public:
  explicit Reference(const EngineConfig& cfg) : cfg_(cfg) {}

  KeyvalId forced_id = 0;  // the id the engine handed out: the reference hands out the same
  std::map<KeyvalId, RefKeyval> keyvals;
  std::map<ObjKey, RefObject> objects;
  std::vector<KeyvalId> live_ids, freed_ids;  // user keyvals, for the generator
  bool finalized = false;

  RefAttr* find_attr(ObjectKind kind, Handle h, KeyvalId k) {
    auto o = objects.find(key(kind, h));
    if (o == objects.end()) return nullptr;
    for (RefAttr& a : o->second.attrs)
      if (a.keyval == k) return &a;
    return nullptr;
  }

  Result create_keyval(const KeyvalSpec& spec, KeyvalId* k) override {
    if (finalized) return res(Status::Finalized);
    if (!k || (spec.copy.action == CopyAction::User && !spec.copy.fn) ||
        (spec.del.action == DeleteAction::User && !spec.del.fn))
      return res(Status::NullArgument);
    keyvals[forced_id].spec = spec;
    live_ids.push_back(forced_id);
    *k = forced_id;
    return {};
  }
  Result free_keyval(ObjectKind kind, KeyvalId* k) override {
    if (finalized) return res(Status::Finalized);
    if (!k) return res(Status::NullArgument);
    if (*k == cfg_.keyval_invalid) return res(Status::KeyvalInvalid);
    auto it = keyvals.find(*k);
    if (it != keyvals.end() && it->second.predefined) return res(Status::KeyvalPredefined);
    if (it == keyvals.end()) return res(Status::KeyvalUnknown);
    RefKeyval& r = it->second;
    if (r.user_freed) return res(Status::KeyvalDoubleFree);
    if (r.spec.kind != kind) return res(Status::KeyvalKindMismatch);
    r.user_freed = true;
    r.destroyed = r.attributes == 0;
    live_ids.erase(std::find(live_ids.begin(), live_ids.end(), *k));
    freed_ids.push_back(*k);
    *k = cfg_.keyval_invalid;
    return {};
  }
  void register_predefined_keyval(ObjectKind kind, KeyvalId id, const char* name, bool copy) {
    RefKeyval& r = keyvals[id];
    r.spec.kind = kind;
    r.predefined = true;
    r.copy_on_dup = copy;
    r.name = name;
  }
  void install_predefined(ObjectKind kind, Handle h, KeyvalId k, Binding repr, std::uint64_t v) {
    add_attr(kind, h, k, repr, v, true);
  }
  Result create_object(ObjectKind kind, Handle h, std::uint8_t flags) override {
    if (finalized) return res(Status::Finalized);
    if (h == null_of(kind)) return res(Status::ObjectNull);
    if (objects.count(key(kind, h))) return res(Status::ObjectExists);
    objects[key(kind, h)].flags = flags;
    return {};
  }
  Result dup_object(ObjectKind kind, Handle old_h, Handle new_h) override {
    if (finalized) return res(Status::Finalized);
    if (Status s = check_object(kind, old_h); s != Status::Ok) return res(s);
    if (new_h == null_of(kind)) return res(Status::ObjectNull);
    if (objects.count(key(kind, new_h))) return res(Status::ObjectExists);
    objects[key(kind, new_h)].flags = kObjectNone;
    const std::vector<RefAttr> src = obj(kind, old_h).attrs;  // oldest first
    for (const RefAttr& a : src) {
      const RefKeyval kv = keyvals.at(a.keyval);
      if (a.predefined) {
        if (kv.copy_on_dup) add_attr(kind, new_h, a.keyval, a.repr, a.word, true);
      } else if (kv.spec.copy.action == CopyAction::Dup) {
        add_attr(kind, new_h, a.keyval, a.repr, a.word, false);
      } else if (kv.spec.copy.action == CopyAction::User) {
        int flag = 0;
        std::uint64_t out = 0;
        const Result r = call_copy(kind, old_h, a, kv, &flag, &out);
        if (!r.ok()) {
          rollback(kind, new_h);
          return r;
        }
        if (flag != 0) add_attr(kind, new_h, a.keyval, kv.spec.lang, out, false);
      }
    }
    return {};
  }
  Result free_object(ObjectKind kind, Handle h) override {
    if (finalized) return res(Status::Finalized);
    if (Status s = check_object(kind, h); s != Status::Ok) return res(s);
    if (obj(kind, h).flags & kObjectPredefined) return res(Status::ObjectPredefined);
    if (running(kind, h)) return res(Status::Reentrant);
    while (!obj(kind, h).attrs.empty()) {  // newest first; stop at a failure
      const RefAttr a = obj(kind, h).attrs.back();
      const Result r = call_delete(kind, h, a, CallbackCause::Free);
      if (!r.ok()) return r;
      obj(kind, h).attrs.pop_back();
      release(a.keyval);
    }
    objects.erase(key(kind, h));
    return {};
  }
  Result set_attr(ObjectKind kind, Handle h, KeyvalId k, Binding from, std::uint64_t v) override {
    if (Status s = check_modify(kind, h, k); s != Status::Ok) return res(s);
    if (const RefAttr* old = find_attr(kind, h, k)) {
      const Result r = call_delete(kind, h, *old, CallbackCause::Set);
      if (!r.ok()) return r;
      erase_attr(kind, h, k);
      --keyvals.at(k).attributes;  // replaced, not gone: a keyval freed meanwhile stays alive
    }
    add_attr(kind, h, k, from, v, false);
    return {};
  }
  Result get_attr(ObjectKind kind, Handle h, KeyvalId k, Binding as, void* val, int* flag, bool* trunc) override {
    if (finalized) return res(Status::Finalized);
    if (!val || !flag) return res(Status::NullArgument);
    if (Status s = check_object(kind, h); s != Status::Ok) return res(s);
    if (Status s = check_keyval(kind, k, false); s != Status::Ok) return res(s);
    RefAttr* a = find_attr(kind, h, k);
    *flag = a ? 1 : 0;
    if (!a) return {};
    if (as == Binding::C) {
      void* p = a->c_read();
      std::memcpy(val, &p, sizeof p);
    } else if (as == Binding::FortranAint) {
      std::memcpy(val, &a->word, sizeof a->word);
    } else {
      std::memcpy(val, &a->cell32, sizeof a->cell32);
      if (trunc) *trunc = sext32(a->word) != a->word;
    }
    return {};
  }
  Result delete_attr(ObjectKind kind, Handle h, KeyvalId k) override {
    if (Status s = check_modify(kind, h, k, /*for_delete=*/true); s != Status::Ok) return res(s);
    const RefAttr* a = find_attr(kind, h, k);
    if (!a) return res(Status::AttrAbsent);
    const Result r = call_delete(kind, h, *a, CallbackCause::Delete);
    if (!r.ok()) return r;
    erase_attr(kind, h, k);
    release(k);
    return {};
  }
  FinalizeReport finalize(const FinalizeOptions& options) override {
    FinalizeReport rep;
    std::vector<std::uint8_t> phases{kObjectSelf};
    if (options.delete_world_attributes) phases.push_back(kObjectWorld);
    for (const std::uint8_t phase : phases) {
      std::vector<ObjKey> targets;
      for (const auto& [k, o] : objects)
        if (o.flags & phase) targets.push_back(k);
      for (const ObjKey& t : targets) {
        const auto kind = static_cast<ObjectKind>(t.first);
        for (std::size_t i = objects.at(t).attrs.size(); i-- > 0;) {  // newest first, past failures
          const RefAttr a = objects.at(t).attrs[i];
          const Result r = call_delete(kind, t.second, a, CallbackCause::Finalize);
          if (!r.ok()) {
            rep.failures.push_back({kind, t.second, a.keyval, r});
            continue;
          }
          objects.at(t).attrs.erase(objects.at(t).attrs.begin() + static_cast<std::ptrdiff_t>(i));
          release(a.keyval);
        }
      }
    }
    finalized = true;
    return rep;
  }

 private:
  RefObject& obj(ObjectKind kind, Handle h) { return objects.at(key(kind, h)); }
  Handle null_of(ObjectKind kind) const { return cfg_.null_handle[static_cast<int>(kind)]; }
  Status check_object(ObjectKind kind, Handle h) const {
    if (h == null_of(kind)) return Status::ObjectNull;
    return objects.count(key(kind, h)) ? Status::Ok : Status::ObjectUnknown;
  }
  // `for_delete`: a key the user freed is still good for deleting the attributes that use it.
  Status check_keyval(ObjectKind kind, KeyvalId k, bool modify, bool for_delete = false) const {
    if (k == cfg_.keyval_invalid) return Status::KeyvalInvalid;
    auto it = keyvals.find(k);
    if (it == keyvals.end()) return Status::KeyvalUnknown;
    if (it->second.user_freed && !(for_delete && !it->second.destroyed)) return Status::KeyvalFreed;
    if (it->second.spec.kind != kind) return Status::KeyvalKindMismatch;
    if (modify && it->second.predefined) return Status::KeyvalPredefined;
    return Status::Ok;
  }
  Status check_modify(ObjectKind kind, Handle h, KeyvalId k, bool for_delete = false) const {  // set / delete
    if (finalized) return Status::Finalized;
    if (Status s = check_object(kind, h); s != Status::Ok) return s;
    if (Status s = check_keyval(kind, k, true, for_delete); s != Status::Ok) return s;
    return running(kind, h) ? Status::Reentrant : Status::Ok;
  }
  bool running(ObjectKind kind, Handle h) const {
    return std::find(running_.begin(), running_.end(), key(kind, h)) != running_.end();
  }
  void add_attr(ObjectKind kind, Handle h, KeyvalId k, Binding repr, std::uint64_t v, bool predefined) {
    RefAttr a;
    a.keyval = k;
    a.repr = repr;
    a.word = repr == Binding::FortranInt ? sext32(v) : v;
    a.predefined = predefined;
    a.cell64 = static_cast<std::int64_t>(a.word);
    a.cell32 = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.word));
    obj(kind, h).attrs.push_back(a);
    ++keyvals.at(k).attributes;
  }
  void erase_attr(ObjectKind kind, Handle h, KeyvalId k) {
    auto& v = obj(kind, h).attrs;
    v.erase(std::find_if(v.begin(), v.end(), [&](const RefAttr& a) { return a.keyval == k; }));
  }
  void release(KeyvalId k) {
    RefKeyval& r = keyvals.at(k);
    --r.attributes;
    if (r.user_freed && r.attributes == 0) r.destroyed = true;
  }
  void rollback(ObjectKind kind, Handle h) {  // newest first, failures ignored
    while (!obj(kind, h).attrs.empty()) {
      const RefAttr a = obj(kind, h).attrs.back();
      call_delete(kind, h, a, CallbackCause::DupRollback);
      obj(kind, h).attrs.pop_back();
      release(a.keyval);
    }
    objects.erase(key(kind, h));
  }
  // The attribute value as a callback in `lang` receives it: a C callback of a Fortran-set value
  // gets a pointer to (a copy of) the integer. `a` must outlive the call.
  static void* arg(RefAttr& a, Binding lang) {
    if (lang == Binding::C) return a.c_read();
    return ptr_of(lang == Binding::FortranInt ? sext32(a.word) : a.word);
  }
  static Result outcome(int rc, bool threw) {
    return threw ? res(Status::CallbackThrew) : rc ? res(Status::CallbackFailed, rc) : Result{};
  }
  Result call_delete(ObjectKind kind, Handle h, const RefAttr& attr, CallbackCause cause) {
    RefAttr a = attr;
    const RefKeyval kv = keyvals.at(a.keyval);
    if (a.predefined || kv.spec.del.action != DeleteAction::User) return {};
    running_.push_back(key(kind, h));
    g.pending_width = kv.spec.lang == Binding::C ? width_of(a.repr) : 0;
    int rc = 0;
    bool threw = false;
    try {
      rc = reinterpret_cast<NativeDeleteFn>(kv.spec.del.fn)(h, a.keyval, arg(a, kv.spec.lang), ptr_of(kv.spec.extra_state));
    } catch (...) {
      threw = true;
    }
    running_.pop_back();
    record_event({CallbackEvent::Which::Delete, cause, kind, h, a.keyval, rc, 0, threw});
    return outcome(rc, threw);
  }
  Result call_copy(ObjectKind kind, Handle old_h, const RefAttr& attr, const RefKeyval& kv, int* flag, std::uint64_t* out) {
    RefAttr a = attr;
    running_.push_back(key(kind, old_h));
    g.pending_width = kv.spec.lang == Binding::C ? width_of(a.repr) : 0;
    int rc = 0;
    bool threw = false;
    try {
      rc = reinterpret_cast<NativeCopyFn>(kv.spec.copy.fn)(old_h, a.keyval, ptr_of(kv.spec.extra_state),
                                                           arg(a, kv.spec.lang), out, flag);
    } catch (...) {
      threw = true;
    }
    running_.pop_back();
    record_event({CallbackEvent::Which::Copy, CallbackCause::Dup, kind, old_h, a.keyval, rc, *flag, threw});
    return outcome(rc, threw);
  }

  EngineConfig cfg_;
  std::vector<ObjKey> running_;  // objects a callback is running for
};

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

enum class OpT : std::uint8_t {
  CreateKeyval, FreeKeyval, CreateObject, DupObject, FreeObject, SetAttr, GetAttr, DeleteAttr, Finalize
};
constexpr KeyvalId kWinKeyvals[3] = {8, 9, 10};

struct Op {
  OpT t = OpT::GetAttr;
  ObjectKind kind = ObjectKind::Comm;
  Handle h = 0, h2 = 0;
  KeyvalId kv = 0;
  Binding b = Binding::C;
  std::uint64_t value = 0;
  std::uint8_t flags = 0;
  KeyvalSpec spec;
  bool null_val = false, null_flag = false, want_trunc = false, world = false;
  std::array<Binding, 3> inst_repr{};  // create_object(Win): MPI_WIN_BASE etc. installed after it
  std::array<std::uint64_t, 3> inst_val{};
};

std::string describe(const Op& op) {
  const char* k = to_string(op.kind);
  const KeyvalSpec& s = op.spec;
  static const char* const copy_names[] = {"User", "NullCopy", "Dup"};
  const bool user_copy = s.copy.action == CopyAction::User, user_del = s.del.action == DeleteAction::User;
  switch (op.t) {
    case OpT::CreateKeyval:
      return fmt("create_keyval(kind=%s copy=%s%s%s del=%s%s%s lang=%s mpi1=%d extra=0x%" PRIx64 "%s)",
                 to_string(s.kind), copy_names[static_cast<int>(s.copy.action)], user_copy && !s.copy.fn ? "(null fn)" : "",
                 s.copy.deprecated ? "(mpi1 name)" : "", user_del ? "User" : "NullDelete",
                 user_del && !s.del.fn ? "(null fn)" : "", s.del.deprecated ? "(mpi1 name)" : "", to_string(s.lang), s.mpi1,
                 s.extra_state, op.null_val ? " keyval=nullptr" : "");
    case OpT::FreeKeyval: return fmt("free_keyval(%s, %s%d)", k, op.null_val ? "nullptr, was " : "", op.kv);
    case OpT::CreateObject:
      return fmt("create_object(%s, 0x%" PRIx64 ", flags=%d)%s", k, op.h, op.flags,
                 op.kind == ObjectKind::Win ? " + install_predefined(8,9,10)" : "");
    case OpT::DupObject: return fmt("dup_object(%s, 0x%" PRIx64 " -> 0x%" PRIx64 ")", k, op.h, op.h2);
    case OpT::FreeObject: return fmt("free_object(%s, 0x%" PRIx64 ")", k, op.h);
    case OpT::SetAttr:
      return fmt("set_attr(%s, 0x%" PRIx64 ", kv=%d, from=%s, value=0x%" PRIx64 ")", k, op.h, op.kv, to_string(op.b),
                 op.value);
    case OpT::GetAttr:
      return fmt("get_attr(%s, 0x%" PRIx64 ", kv=%d, as=%s%s%s%s)", k, op.h, op.kv, to_string(op.b),
                 op.null_val ? ", val=nullptr" : "", op.null_flag ? ", flag=nullptr" : "", op.want_trunc ? ", &truncated" : "");
    case OpT::DeleteAttr: return fmt("delete_attr(%s, 0x%" PRIx64 ", kv=%d)", k, op.h, op.kv);
    case OpT::Finalize: return fmt("finalize(delete_world_attributes=%d)", op.world);
  }
  return "?";
}

std::string describe(const Script& s) {
  std::string out = "script{";
  for (int i = 0; i < Script::kN; ++i) {
    if (s.rc_at(i)) out += fmt(" call#%d rc=%d", i, s.rc_at(i));
    if (s.throws_at(i)) out += fmt(" call#%d throws", i);
    if (s.flag_at(i) != 1) out += fmt(" call#%d flag=%d", i, s.flag_at(i));
  }
  const Nested& n = s.nested;
  if (n.op != NestedOp::None) {
    const std::string target = n.own_object ? "OWN object" : fmt("%s 0x%" PRIx64, to_string(n.kind), n.h);
    const std::string kv = n.own_keyval ? "OWN" : std::to_string(n.kv);
    out += fmt(" call#%d does %s(%s, kv=%s, %s, 0x%" PRIx64 ")", s.nested_at, kNestedNames[static_cast<int>(n.op)],
               target.c_str(), kv.c_str(), to_string(n.b), n.value);
  }
  return out + " salt=" + hex(s.salt) + " }";
}

struct Outcome {
  Result r;
  KeyvalId id = 0;
  int flag = 0, width = 0;
  std::uint64_t val = 0;
  bool trunc = false, untouched = true;
  std::string note;
  std::vector<Ev> trace;
  std::vector<Hint> hints;
  std::vector<Result> installs;
  std::vector<FinalizeReport::Failure> failures;
};

// ---------------------------------------------------------------------------------------------
// The driver: generation, execution on both implementations, comparison
// ---------------------------------------------------------------------------------------------

class ModelRun {
 public:
  explicit ModelRun(int seed) : seed_(seed), rng_(0x5EEDull * static_cast<std::uint64_t>(seed) + 17) {
    static const KeyvalId invalids[] = {-1, -7, 0x24000000};
    cfg_.keyval_invalid = invalids[rnd(3)];
    const bool mpich = chance(50);  // int handles with non-zero nulls, or pointers with 0
    for (int k = 0; k < kObjectKinds; ++k) {
      const auto kk = static_cast<Handle>(k);
      const Handle base = mpich ? 0x44000000ull + 0x1000000ull * kk : 0x7f3a00000000ull + 0x100000ull * kk;
      cfg_.null_handle[k] = mpich ? 0x04000000ull + 0x8000000ull * kk : 0;
      pool_[k][0] = cfg_.null_handle[k];
      for (std::size_t i = 1; i < 16; ++i) pool_[k][i] = base + 0x40 * i;
    }
    cfg_.observer = &observer_;
    engine_ = std::make_unique<Engine>(cfg_);
    eimpl_ = std::make_unique<EngineImpl>(engine_.get());
    if (chance(50)) engine_->drop_locking();  // as below MPI_THREAD_MULTIPLE: the same results
    memos_.clear();
    ref_ = std::make_unique<Reference>(cfg_);
    g = Ctx{};
    g.script = &kNoScript;
    g.trace = &g_sink;
  }
  ~ModelRun() { g = Ctx{}; }

  // Predefined keyvals (ids 0..10; 5..7 stay unregistered) and objects, on both implementations:
  // pool index 1 of Comm is MPI_COMM_WORLD, 2 MPI_COMM_SELF, index 1 of Type a predefined type.
  void setup() {
    struct Pre { ObjectKind kind; KeyvalId id; const char* name; bool copy; };
    static const Pre pre[] = {
        {ObjectKind::Comm, 0, "MPI_TAG_UB", true},      {ObjectKind::Comm, 1, "MPI_HOST", false},
        {ObjectKind::Comm, 2, "MPI_IO", true},          {ObjectKind::Comm, 3, "MPI_WTIME_IS_GLOBAL", false},
        {ObjectKind::Type, 4, "MODEL_TYPE_ATTR", true}, {ObjectKind::Win, 8, "MPI_WIN_BASE", false},
        {ObjectKind::Win, 9, "MPI_WIN_SIZE", false},    {ObjectKind::Win, 10, "MPI_WIN_DISP_UNIT", true}};
    for (const Pre& p : pre) {
      ASSERT_EQ(engine_->register_predefined_keyval(p.kind, p.id, p.name, p.copy), Result{}) << p.name;
      ref_->register_predefined_keyval(p.kind, p.id, p.name, p.copy);
    }
    for (Impl* impl : {static_cast<Impl*>(eimpl_.get()), static_cast<Impl*>(ref_.get())}) {
      ASSERT_EQ(impl->create_object(ObjectKind::Comm, pool_[0][1], kObjectPredefined | kObjectWorld), Result{});
      ASSERT_EQ(impl->create_object(ObjectKind::Comm, pool_[0][2], kObjectPredefined | kObjectSelf), Result{});
      ASSERT_EQ(impl->create_object(ObjectKind::Type, pool_[1][1], kObjectPredefined), Result{});
    }
    for (KeyvalId k : {0, 1, 2, 3, 4}) {
      const auto repr = static_cast<Binding>(rnd(3));
      const std::uint64_t v = pick_value(repr);
      const ObjectKind kind = k == 4 ? ObjectKind::Type : ObjectKind::Comm;
      ASSERT_EQ(engine_->install_predefined(kind, pool_[k == 4 ? 1 : 0][1], k, repr, v), Result{});
      ref_->install_predefined(kind, pool_[k == 4 ? 1 : 0][1], k, repr, v);
    }
    check_state();
  }

  void run(int nops, int finalize_at) {
    for (step_ = 0; step_ < nops; ++step_) {
      do_step(step_ == finalize_at);
      if (::testing::Test::HasFatalFailure()) return;
      if ((step_ + 1) % check_every_ == 0) check_state();
      if (::testing::Test::HasFatalFailure()) return;
    }
    check_state();
  }

 private:
  std::uint64_t rnd(std::uint64_t n) { return rng_() % n; }
  bool chance(int pct) { return rnd(100) < static_cast<std::uint64_t>(pct); }

  std::string where() const {
    std::string s = fmt("seed=%d step=%d (keyval_invalid=%d)\nlast operations, oldest first:\n", seed_, step_,
                        cfg_.keyval_invalid);
    for (const auto& [i, op, script] : recent_) s += fmt("  #%d ", i) + describe(op) + "  " + describe(script) + "\n";
    return s;
  }

  // --- generation (from the reference's state before the operation) ---
  ObjectKind pick_kind() {
    const std::uint64_t r = rnd(4);
    return r < 2 ? ObjectKind::Comm : r == 2 ? ObjectKind::Type : ObjectKind::Win;
  }
  Handle pick_object(ObjectKind kind) {
    const std::uint64_t r = rnd(100);
    if (r < 80) {
      std::vector<Handle> live;
      for (const auto& [k, o] : ref_->objects)
        if (k.first == static_cast<int>(kind)) live.push_back(k.second);
      if (!live.empty()) return live[rnd(live.size())];
    }
    if (r < 95) return pool_[static_cast<int>(kind)][rnd(16)];
    return pool_[rnd(3)][rnd(16)];  // possibly another kind's handle: unknown as this kind
  }
  KeyvalId pick_keyval(ObjectKind kind, Handle h) {
    const std::uint64_t r = rnd(100);
    const auto& live = ref_->live_ids;
    const auto& freed = ref_->freed_ids;
    if (r < 30) {  // one set on the object (possibly freed since, or predefined)
      const auto o = ref_->objects.find(key(kind, h));
      if (o != ref_->objects.end() && !o->second.attrs.empty()) return o->second.attrs[rnd(o->second.attrs.size())].keyval;
    }
    if (r < 70 || (r >= 86 && r < 94 && freed.empty())) {
      std::vector<KeyvalId> of_kind;
      for (KeyvalId id : live)
        if (ref_->keyvals.at(id).spec.kind == kind) of_kind.push_back(id);
      if (!of_kind.empty()) return of_kind[rnd(of_kind.size())];
    }
    if (r < 86 && !live.empty()) return live[rnd(live.size())];
    if (r < 94 && !freed.empty()) return freed[rnd(freed.size())];  // stale, maybe destroyed / slot reused
    if (r < 97) return static_cast<KeyvalId>(rnd(12));             // predefined (or unregistered 5..7, 11)
    if (r < 98) return cfg_.keyval_invalid;
    // Never created (at least not yet): small ids, negatives, ids near the engine's own.
    const KeyvalId known = live.empty() ? 65536 : live[rnd(live.size())];
    const KeyvalId choices[] = {12 + static_cast<KeyvalId>(rnd(40)), -2 - static_cast<KeyvalId>(rnd(100)), 0x7FFFFFFF,
                                known + 1, known + 65536, known ^ 0x40000000, known + 0x1000000};
    return choices[rnd(std::size(choices))];
  }
  std::uint64_t pick_value(Binding b) {
    static const std::uint64_t edges[] = {0x7FFFFFFFull,         0xFFFFFFFF80000000ull, 0x80000000ull, 0x100000000ull,
                                          0xFFFFFFFF7FFFFFFFull, 0x8000000000000000ull, 0xFFFFFFFFull, 0x1FFFFFFFFull};
    const std::uint64_t r = rnd(100);
    if (b == Binding::C || r < 15) return kPalette[rnd(kPaletteSize)];
    if (r < 50) return rnd(101) - 50;
    if (r < 75) return rng_();
    return edges[rnd(std::size(edges))];
  }
  KeyvalSpec make_spec() {
    KeyvalSpec s;
    s.kind = pick_kind();
    const std::uint64_t c = rnd(100), l = rnd(100);
    s.copy.action = c < 25 ? CopyAction::NullCopy : c < 50 ? CopyAction::Dup : CopyAction::User;
    if (s.copy.action == CopyAction::User && !chance(2)) s.copy.fn = reinterpret_cast<void*>(&test_copy);
    s.copy.deprecated = chance(25);
    s.del.action = chance(30) ? DeleteAction::NullDelete : DeleteAction::User;
    if (s.del.action == DeleteAction::User && !chance(2)) s.del.fn = reinterpret_cast<void*>(&test_delete);
    s.del.deprecated = chance(25);
    s.extra_state = chance(50) ? rng_() : rnd(1000);
    s.lang = l < 50 ? Binding::C : l < 80 ? Binding::FortranAint : Binding::FortranInt;
    s.mpi1 = s.kind == ObjectKind::Comm && chance(15);
    return s;
  }
  Op gen_op(bool finalize) {
    Op op;
    op.kind = pick_kind();
    if (finalize) {
      op.t = OpT::Finalize;
      op.world = chance(50);
      return op;
    }
    // Cumulative weights of create_keyval, free_keyval, create/dup/free_object, set/get/delete_attr;
    // every 4th seed churns keyvals (so that the engine reuses keyval slots with new generations).
    static const std::uint64_t normal[] = {5, 8, 20, 31, 40, 66, 88, 100}, churn[] = {20, 35, 45, 53, 60, 78, 92, 100};
    const std::uint64_t* cum = seed_ % 4 == 3 ? churn : normal;
    std::uint64_t w = rnd(100);
    if (w < cum[0] && ref_->live_ids.size() > 40 && chance(75)) w = cum[4];  // enough keyvals: set an attribute
    const Handle any = pool_[static_cast<int>(op.kind)][rnd(16)];
    if (w < cum[0]) {
      op.t = OpT::CreateKeyval;
      op.spec = make_spec();
      op.null_val = chance(2);
    } else if (w < cum[1]) {
      op.t = OpT::FreeKeyval;
      op.kv = pick_keyval(op.kind, 0);
      const auto it = ref_->keyvals.find(op.kv);
      if (it != ref_->keyvals.end() && chance(85)) op.kind = it->second.spec.kind;
      op.null_val = chance(3);
    } else if (w < cum[2]) {
      op.t = OpT::CreateObject;
      op.h = any;
      op.flags = op.h == pool_[static_cast<int>(op.kind)][3] ? kObjectPredefined : kObjectNone;  // one such slot
      for (std::size_t i = 0; i < 3; ++i) {
        op.inst_repr[i] = static_cast<Binding>(rnd(3));
        op.inst_val[i] = pick_value(op.inst_repr[i]);
      }
    } else if (w < cum[3]) {
      op.t = OpT::DupObject;
      op.h = pick_object(op.kind);
      op.h2 = any;
    } else if (w < cum[4]) {
      op.t = OpT::FreeObject;
      op.h = pick_object(op.kind);
    } else {
      op.t = w < cum[5] ? OpT::SetAttr : w < cum[6] ? OpT::GetAttr : OpT::DeleteAttr;
      op.h = pick_object(op.kind);
      op.kv = pick_keyval(op.kind, op.h);
      op.b = static_cast<Binding>(rnd(3));
      op.value = pick_value(op.b);
      op.null_val = chance(3);
      op.null_flag = chance(3);
      op.want_trunc = chance(70);
    }
    return op;
  }
  Script gen_script(const Op& op) {
    Script s;
    s.salt = rng_();
    for (int& f : s.flag) {
      const std::uint64_t r = rnd(100);
      f = r < 20 ? 0 : r < 92 ? 1 : 7;
    }
    auto idx = [&] { return static_cast<std::size_t>(std::min(rnd(5), rnd(5))); };  // early calls more often
    static const int rcs[] = {1, 42, -7, 1000};
    const std::uint64_t f = rnd(100);
    if (f < 12) s.rc[idx()] = rcs[rnd(4)];
    else if (f < 14) s.throws[idx()] = true;
    else if (f < 17) s.rc[idx()] = rcs[rnd(4)], s.rc[idx()] = rcs[rnd(4)];
    if (chance(30)) {
      Nested& n = s.nested;
      s.nested_at = static_cast<int>(idx());
      n.op = static_cast<NestedOp>(1 + rnd(5));
      n.own_object = chance(35);
      n.kind = pick_kind();
      n.h = pick_object(n.kind);
      // The object a dup is creating is off limits (its state mid-dup is not specified).
      if (op.t == OpT::DupObject && n.kind == op.kind && n.h == op.h2) n.own_object = true;
      n.own_keyval = chance(n.own_object ? 60 : 25);
      n.kv = pick_keyval(n.kind, n.h);
      n.b = n.op == NestedOp::Get ? (chance(50) ? Binding::FortranAint : Binding::FortranInt) : static_cast<Binding>(rnd(3));
      n.value = pick_value(n.b);
    }
    return s;
  }

  // --- execution ---
  Outcome exec(Impl& impl, bool reference, const Op& op, const Script& s, const Outcome* ro) {
    Outcome o;
    g.impl = &impl;
    g.script = &s;
    g.trace = &o.trace;
    g.reference = reference;
    g.calls = g.depth = g.pending_width = 0;
    g.hints.clear();
    g.ref_hints = ro ? &ro->hints : nullptr;
    switch (op.t) {
      case OpT::CreateKeyval:
        o.id = -12345;
        o.r = impl.create_keyval(op.spec, op.null_val ? nullptr : &o.id);
        break;
      case OpT::FreeKeyval:
        o.id = op.kv;
        o.r = impl.free_keyval(op.kind, op.null_val ? nullptr : &o.id);
        break;
      case OpT::CreateObject:
        o.r = impl.create_object(op.kind, op.h, op.flags);
        if (!o.r.ok() || op.kind != ObjectKind::Win) break;
        for (std::size_t i = 0; i < 3; ++i) {
          if (reference) ref_->install_predefined(op.kind, op.h, kWinKeyvals[i], op.inst_repr[i], op.inst_val[i]);
          o.installs.push_back(reference ? Result{} : engine_->install_predefined(op.kind, op.h, kWinKeyvals[i],
                                                                                    op.inst_repr[i], op.inst_val[i]));
        }
        break;
      case OpT::DupObject: o.r = impl.dup_object(op.kind, op.h, op.h2); break;
      case OpT::FreeObject: o.r = impl.free_object(op.kind, op.h); break;
      case OpT::SetAttr: o.r = impl.set_attr(op.kind, op.h, op.kv, op.b, op.value); break;
      case OpT::DeleteAttr: o.r = impl.delete_attr(op.kind, op.h, op.kv); break;
      case OpT::GetAttr: exec_get(impl, reference, op, ro, o); break;
      case OpT::Finalize: {
        FinalizeOptions fo;
        fo.delete_world_attributes = op.world;
        o.failures = impl.finalize(fo).failures;
        break;
      }
    }
    if (reference) o.hints = std::move(g.hints);
    g.impl = nullptr;
    g.script = &kNoScript;
    g.trace = &g_sink;
    return o;
  }
  void exec_get(Impl& impl, bool reference, const Op& op, const Outcome* ro, Outcome& o) {
    alignas(8) unsigned char buf[8];
    std::memset(buf, 0xA5, sizeof buf);
    int flag = -3;
    bool trunc = false;
    o.r = impl.get_attr(op.kind, op.h, op.kv, op.b, op.null_val ? nullptr : buf, op.null_flag ? nullptr : &flag,
                        op.want_trunc ? &trunc : nullptr);
    if (!o.r.ok()) return;
    o.flag = flag;
    o.trunc = trunc;
    if (flag == 0) {
      o.untouched = std::all_of(std::begin(buf), std::end(buf), [](unsigned char c) { return c == 0xA5; });
      return;
    }
    if (op.b != Binding::C) {
      o.val = load(buf, op.b == Binding::FortranInt ? 32 : 64);
      return;
    }
    // C: an address, or a pointer to the stored integer (compare what it points to).
    void* p;
    std::memcpy(&p, buf, sizeof p);
    o.val = word_of(p);
    const RefAttr* ra = reference ? ref_->find_attr(op.kind, op.h, op.kv) : nullptr;
    o.width = reference ? (ra ? width_of(ra->repr) : 0) : (ro ? ro->width : 0);
    if (o.width == 0) return;
    if (!reference) {  // make sure it is a pointer of that width before dereferencing it
      bool repr_ok = false;
      for (const AttributeInfo& a : engine_->attributes(op.kind, op.h))
        if (a.keyval == op.kv) repr_ok = width_of(a.repr) == o.width;
      if (!repr_ok) o.note = "engine's representation differs: C read not dereferenced";
      else if (!plausible_pointer(o.val, o.width)) o.note = "C read: address where a pointer was due";
      if (!o.note.empty()) return;
    }
    o.val = load(p, o.width);
  }

  static std::string diff(const Op& op, const Outcome& r, const Outcome& e) {
    std::string d;
    auto add = [&](const char* what, const std::string& rv, const std::string& ev) {
      d += std::string("  ") + what + ": reference=" + rv + " engine=" + ev + "\n";
    };
    auto num = [](auto v) { return std::to_string(v); };
    if (!same(r.r, e.r)) add("result", str(r.r), str(e.r));
    if (op.t == OpT::FreeKeyval && r.id != e.id) add("keyval afterwards", num(r.id), num(e.id));
    if (op.t == OpT::GetAttr && r.r.ok() && e.r.ok()) {
      if (r.flag != e.flag) add("flag", num(r.flag), num(e.flag));
      else if (r.flag == 0 && r.untouched != e.untouched) add("output untouched at flag=0", num(r.untouched), num(e.untouched));
      else if (r.flag != 0 && r.val != e.val) add(r.width ? "value (pointed to)" : "value", hex(r.val), hex(e.val));
      if (r.trunc != e.trunc) add("truncated", num(r.trunc), num(e.trunc));
    }
    if (r.note != e.note) add("note", r.note, e.note);
    if (r.installs.size() != e.installs.size() || !std::equal(r.installs.begin(), r.installs.end(), e.installs.begin(), same))
      add("install_predefined results", num(r.installs.size()), num(e.installs.size()));
    auto failures = [&](const std::vector<FinalizeReport::Failure>& fs) {
      std::string s;
      for (const auto& f : fs) s += fmt("%s:0x%" PRIx64 ":kv%d:", to_string(f.kind), f.object, f.keyval) + str(f.result) + " ";
      return s;
    };
    if (failures(r.failures) != failures(e.failures)) add("finalize failures", failures(r.failures), failures(e.failures));
    if (r.trace != e.trace) {
      std::size_t i = 0;
      while (i < r.trace.size() && i < e.trace.size() && r.trace[i] == e.trace[i]) ++i;
      d += "  trace differs at entry " + num(i) + "\n    reference trace:\n";
      for (std::size_t j = 0; j < r.trace.size() && j < 40; ++j) d += "      " + r.trace[j].text() + "\n";
      d += "    engine trace:\n";
      for (std::size_t j = 0; j < e.trace.size() && j < 40; ++j) d += "      " + e.trace[j].text() + "\n";
    }
    return d;
  }

  void do_step(bool finalize) {
    const Op op = gen_op(finalize);
    const Script s = gen_script(op);
    recent_.emplace_back(step_, op, s);
    if (recent_.size() > 10) recent_.pop_front();
    Outcome ro, eo;
    if (op.t == OpT::CreateKeyval) {  // the engine first: the reference takes over its id
      eo = exec(*eimpl_, false, op, s, nullptr);
      if (eo.r.ok()) {
        ASSERT_TRUE(eo.id > 0 && eo.id != cfg_.keyval_invalid && !ref_->keyvals.count(eo.id) &&
                    engine_->is_engine_keyval(eo.id))
            << where() << "create_keyval handed out id " << eo.id << ", which is not a fresh positive id";
        ref_->forced_id = eo.id;
        g.meta[eo.id] = {op.spec.kind, op.spec.lang};
      }
      ro = exec(*ref_, true, op, s, nullptr);
    } else {
      ro = exec(*ref_, true, op, s, nullptr);
      eo = exec(*eimpl_, false, op, s, &ro);
    }
    const std::string d = diff(op, ro, eo);
    ASSERT_TRUE(d.empty()) << where() << "divergence in " << describe(op) << ":\n" << d;
    check_versions(op);
  }

  // Engine::version() / layout_version() promise that a memoised get answer stays right while
  // they read the same (the runtime's query cache relies on it). After every step, the last few
  // distinct get queries are asked again: a query whose answer changed while version() did not,
  // or whose validity changed while layout_version() did not, fails the test at the step that
  // forgot to advance them.
  struct Query {
    ObjectKind kind;
    Handle h;
    KeyvalId kv;
    Binding b;
    bool operator==(const Query& o) const { return kind == o.kind && h == o.h && kv == o.kv && b == o.b; }
  };
  struct Answer {
    Result r;
    int flag = 0;
    std::uint64_t raw = 0;  // the output word as stored, not dereferenced
    bool trunc = false;
    bool operator==(const Answer& o) const { return r == o.r && flag == o.flag && raw == o.raw && trunc == o.trunc; }
  };
  struct Memo {
    Query q;
    std::uint64_t version, layout;
    Answer a;
  };
  std::deque<Memo> memos_;
  Answer ask(const Query& q) const {
    Answer a;
    std::uint64_t buf = 0x5A5A5A5A5A5A5A5AULL;
    a.r = engine_->get_attr(q.kind, q.h, q.kv, q.b, &buf, &a.flag, &a.trunc);
    a.raw = a.flag ? buf : 0;
    return a;
  }
  void check_versions(const Op& op) {
    if (engine_->finalized()) return;
    const std::uint64_t version = engine_->version(), layout = engine_->layout_version();
    ASSERT_EQ(version % 2, 0u) << where() << "version() odd between operations";
    ASSERT_NE(layout, 0u) << where();
    for (Memo& m : memos_) {
      ASSERT_LE(m.version, version) << where() << "version() went backwards";
      ASSERT_LE(m.layout, layout) << where() << "layout_version() went backwards";
      const Answer now = ask(m.q);
      if (m.layout == layout) {
        ASSERT_EQ(str(m.a.r), str(now.r)) << where() << "after " << describe(op)
                                          << ": a query's validity changed, layout_version() did not";
      }
      if (m.version == version) {
        ASSERT_TRUE(m.a == now) << where() << "after " << describe(op) << ": a get's answer changed, version() did not";
      }
      m = Memo{m.q, version, layout, now};
    }
    if (op.t != OpT::GetAttr) return;
    const Query q{op.kind, op.h, op.kv, op.b};
    if (std::any_of(memos_.begin(), memos_.end(), [&](const Memo& m) { return m.q == q; })) return;
    memos_.push_back(Memo{q, version, layout, ask(q)});
    if (memos_.size() > 8) memos_.pop_front();
  }

  // --- the whole visible state ---
  static std::string info_diff(KeyvalId id, const KeyvalInfo& e, const RefKeyval& r) {
    const KeyvalSpec &a = e.spec, &b = r.spec;
    std::string d;
    auto chk = [&](bool ok, const char* what) { d += ok ? "" : std::string(" ") + what; };
    chk(e.id == id && e.kind == r.spec.kind && e.predefined == r.predefined, "id/kind/predefined");
    if (r.predefined) chk(e.name == r.name, "name");
    if (!r.predefined) {
      chk(e.user_freed == r.user_freed && e.destroyed == r.destroyed && e.attributes == r.attributes, "state");
      chk(a.kind == b.kind && a.copy.action == b.copy.action && a.copy.fn == b.copy.fn &&
              a.copy.deprecated == b.copy.deprecated && a.del.action == b.del.action && a.del.fn == b.del.fn &&
              a.del.deprecated == b.del.deprecated && a.extra_state == b.extra_state && a.lang == b.lang &&
              a.mpi1 == b.mpi1,
          "spec");
    }
    if (d.empty()) return d;
    return fmt("keyval %d differs in%s (reference: user_freed=%d destroyed=%d attributes=%u; engine: id=%d "
               "user_freed=%d destroyed=%d attributes=%u)",
               id, d.c_str(), r.user_freed, r.destroyed, r.attributes, e.id, e.user_freed, e.destroyed, e.attributes);
  }

  void check_state() {
    ASSERT_EQ(engine_->finalized(), ref_->finalized) << where();
    (void)engine_->attribute_bytes();
    // Objects.
    const auto objs = engine_->objects();
    ASSERT_EQ(objs.size(), ref_->objects.size()) << where() << "number of live objects";
    for (const ObjectInfo& o : objs) {
      const auto it = ref_->objects.find(key(o.kind, o.handle));
      ASSERT_TRUE(it != ref_->objects.end() && o.flags == it->second.flags && o.attributes == it->second.attrs.size())
          << where() << fmt("engine's object %s 0x%" PRIx64 " (flags %d, %zu attributes) is not the reference's",
                            to_string(o.kind), o.handle, o.flags, o.attributes);
    }
    // Attributes, grouped per object, in set order.
    std::map<ObjKey, std::vector<AttributeInfo>> eng;
    for (const AttributeInfo& a : engine_->attributes()) eng[key(a.kind, a.object)].push_back(a);
    for (auto& [k, v] : eng)
      std::sort(v.begin(), v.end(), [](const AttributeInfo& x, const AttributeInfo& y) { return x.order < y.order; });
    for (const auto& [k, ro] : ref_->objects) {
      const std::vector<AttributeInfo>& ea = eng[k];
      auto text = [&, &k = k, &ro = ro] {
        std::string s = fmt("object %s 0x%" PRIx64 "\n  reference:", to_string(static_cast<ObjectKind>(k.first)), k.second);
        for (const RefAttr& a : ro.attrs)
          s += fmt(" kv%d/%s/0x%" PRIx64 "%s", a.keyval, to_string(a.repr), a.word, a.predefined ? "/pre" : "");
        s += "\n  engine:   ";
        for (const AttributeInfo& a : ea)
          s += fmt(" kv%d/%s/0x%" PRIx64 "%s", a.keyval, to_string(a.repr), a.value, a.predefined ? "/pre" : "");
        return s + "\n";
      };
      ASSERT_EQ(ro.attrs.size(), ea.size()) << where() << text();
      for (std::size_t i = 0; i < ea.size(); ++i) {
        const RefAttr& r = ro.attrs[i];
        const AttributeInfo& e = ea[i];
        ASSERT_TRUE(e.keyval == r.keyval && e.repr == r.repr && e.value == r.word && e.predefined == r.predefined &&
                    e.object_flags == ro.flags && (i == 0 || ea[i - 1].order < e.order) &&
                    (r.predefined || e.delete_action == ref_->keyvals.at(r.keyval).spec.del.action))
            << where() << "attribute #" << i << " differs (or its object flags / order / delete_action do)\n" << text();
      }
      if (ea.empty()) continue;
      const auto newest_last = engine_->attributes(static_cast<ObjectKind>(k.first), k.second);
      ASSERT_EQ(newest_last.size(), ea.size()) << where() << text();
      for (std::size_t i = 0; i < ea.size(); ++i) ASSERT_EQ(newest_last[i].keyval, ea[i].keyval) << where() << text();
    }
    ASSERT_EQ(eng.size(), ref_->objects.size()) << where() << "attributes() lists objects that are not live";
    // Keyvals: keyval_info of every id ever seen, is_engine_keyval, live_keyvals, leaked_keyvals.
    std::vector<KeyvalId> live_ref, leaked_ref, live_eng, leaked_eng;
    for (const auto& [id, r] : ref_->keyvals) {
      KeyvalInfo info;
      const bool found = engine_->keyval_info(id, &info);
      if (r.predefined || !r.destroyed) {
        ASSERT_TRUE(found) << where() << "keyval_info(" << id << ") returned false";
        const std::string d = info_diff(id, info, r);
        ASSERT_TRUE(d.empty()) << where() << d;
      } else if (found) {  // a destroyed keyval may be forgotten, but not misreported
        ASSERT_TRUE(info.id == id && info.destroyed && info.user_freed && info.attributes == 0)
            << where() << "destroyed " << info_diff(id, info, r);
      }
      ASSERT_EQ(engine_->is_engine_keyval(id), !r.predefined) << where() << "is_engine_keyval(" << id << ")";
      if (!r.predefined && !r.destroyed) live_ref.push_back(id);
      if (!r.predefined && !r.user_freed) leaked_ref.push_back(id);
    }
    for (KeyvalId id : {5, 6, 7, 11, 40, -99}) {
      KeyvalInfo info;
      if (ref_->keyvals.count(id) || id == cfg_.keyval_invalid) continue;
      ASSERT_FALSE(engine_->keyval_info(id, &info)) << where() << "keyval_info of never-created id " << id;
      ASSERT_FALSE(engine_->is_engine_keyval(id)) << where() << "is_engine_keyval of never-created id " << id;
    }
    for (const KeyvalInfo& i : engine_->live_keyvals()) {
      live_eng.push_back(i.id);
      const auto it = ref_->keyvals.find(i.id);
      ASSERT_TRUE(it != ref_->keyvals.end()) << where() << "live_keyvals() lists unknown id " << i.id;
      ASSERT_EQ(info_diff(i.id, i, it->second), "") << where() << "live_keyvals()";
    }
    for (const KeyvalInfo& i : engine_->leaked_keyvals()) leaked_eng.push_back(i.id);
    std::sort(live_eng.begin(), live_eng.end());
    std::sort(leaked_eng.begin(), leaked_eng.end());
    ASSERT_EQ(live_ref, live_eng) << where() << "live_keyvals() ids";
    ASSERT_EQ(leaked_ref, leaked_eng) << where() << "leaked_keyvals() ids";
  }

  int seed_;
  std::mt19937_64 rng_;
  EngineConfig cfg_;
  RecordingObserver observer_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineImpl> eimpl_;
  std::unique_ptr<Reference> ref_;
  Handle pool_[kObjectKinds][16] = {};
  int step_ = -1;
  std::deque<std::tuple<int, Op, Script>> recent_;
  const char* check_env_ = std::getenv("ATTRCHECK_MODEL_CHECK_EVERY");
  int check_every_ = check_env_ ? std::max(1, std::atoi(check_env_)) : kCheckEvery;
};

class EngineModel : public ::testing::TestWithParam<int> {};

TEST_P(EngineModel, RandomOperationsMatchReference) {
  const int seed = GetParam();
  ModelRun run(seed);
  run.setup();
  if (HasFatalFailure()) return;
  // Half of the runs finalize near the end; the remaining operations must all be refused.
  run.run(kOpsPerSeed, seed % 2 == 0 ? kOpsPerSeed - 300 : -1);
}

INSTANTIATE_TEST_SUITE_P(Seeds, EngineModel, ::testing::Range(0, kSeeds));

}  // namespace
