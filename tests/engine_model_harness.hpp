// The harness of the engine's randomized model-based test (engine_model_test.cpp): the value
// palette, the trace of callback calls and events, the per-operation scripts and the test
// callbacks that follow them, and the interface both implementations are driven through (the
// engine's adapter here; the reference model in engine_model_reference.hpp).
#pragma once

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

namespace engine_model {

using namespace attrcheck;

// ---------------------------------------------------------------------------------------------
// Values and small helpers
// ---------------------------------------------------------------------------------------------

inline std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
inline std::string fmt(const char* f, ...) {
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
inline std::uint64_t sext32(std::uint64_t v) {
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
inline std::string str(Result r) {
  return to_string(r.status) + (r.status == Status::CallbackFailed ? "(" + std::to_string(r.callback_rc) + ")" : "");
}
bool same(Result a, Result b) {  // an invoker that threw has no meaningful rc
  return a.status == b.status && (a.status == Status::CallbackThrew || a.callback_rc == b.callback_rc);
}

// ---------------------------------------------------------------------------------------------
// The trace: callback calls, nested-call results and Observer events, in order
// ---------------------------------------------------------------------------------------------

enum class NestedOp : std::uint8_t { None, Set, Delete, Get, FreeObject, FreeKeyval };
inline const char* const kNestedNames[] = {"none", "set_attr", "delete_attr", "get_attr", "free_object", "free_keyval"};

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
  bool identity = false;   // C copy callbacks give back the value they were given (a dup's quick copy)
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
inline Ctx g;
inline const Script kNoScript;
inline std::vector<Ev> g_sink;

struct CallbackThrow {};
struct DepthGuard {
  DepthGuard() { ++g.depth; }
  ~DepthGuard() { --g.depth; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;
};

// Whether the run watches the engine with an Observer (the reference then records the same
// events). Without one, and with the lock dropped, a free through a kept plan takes its quick step
// between two callbacks (Engine::Impl::free_step), which an observed engine never takes.
inline bool g_observed = true;

inline void record_event(const CallbackEvent& e) {
  if (!g_observed) return;
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
inline std::uint64_t seen_value(int idx, Ev& ev, void* in) {
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

inline void maybe_nested(int idx, Handle obj, KeyvalId cb_kv);

// Common part of both callbacks: record the call, then do the scripted nested call.
inline Ev enter(int idx, Ev::Type type, Handle obj, KeyvalId kv, void* value, void* extra_state) {
  Ev ev(type, obj, kv);
  ev.v2 = word_of(extra_state);
  ev.v1 = seen_value(idx, ev, value);
  g.trace->push_back(ev);
  maybe_nested(idx, obj, kv);
  return ev;
}

inline int test_copy(Handle old_object, int keyval, void* extra_state, void* in, void* out, int* flag) {
  const int idx = g.calls++;
  DepthGuard depth;
  const Ev ev = enter(idx, Ev::CopyCall, old_object, keyval, in, extra_state);
  const auto m = g.meta.find(keyval);
  const Binding lang = m == g.meta.end() ? Binding::C : m->second.lang;
  const std::uint64_t x = mix(ev.v1 ^ g.script->salt ^ static_cast<std::uint64_t>(idx));
  std::uint64_t v = x;  // FortranAint: anything
  // (identity: not for a Fortran-set value, which a C callback is given as the address of wherever
  // each implementation keeps it: ev.a, its width)
  if (lang == Binding::C)
    v = g.script->identity && ev.a == 0 ? reinterpret_cast<std::uintptr_t>(in) : kPalette[x % kPaletteSize];
  if (lang == Binding::FortranAint && (x >> 8) % 3 == 0) v = x % 101 - 50;
  if (lang == Binding::FortranInt) v = sext32(x);
  std::memcpy(out, &v, sizeof v);
  *flag = g.script->flag_at(idx);
  if (g.script->throws_at(idx)) throw CallbackThrow{};
  return g.script->rc_at(idx);
}

inline int test_delete(Handle object, int keyval, void* value, void* extra_state) {
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

inline void maybe_nested(int idx, Handle obj, KeyvalId cb_kv) {
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

}  // namespace engine_model
