// Shared fixtures of the engine gtest suites (tests/engine_*_test.cpp): handles, keyval specs
// whose callbacks record what they saw (Rec), an engine watched by an observer (Watched), a
// recording invoker, and small readers. Callbacks are engine-native C functions (NativeCopyFn /
// NativeDeleteFn) called by the default NativeInvoker; each gets a `Rec` through extra_state.
// Tests that need to see the raw CopyCall / DeleteCall (language conversion, throwing) install a
// RecordingInvoker instead.
#pragma once

#include "attrcheck/engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace attrcheck {
// Readable gtest output for Result.
inline void PrintTo(const Result& r, std::ostream* os) {
  *os << to_string(r.status);
  if (r.callback_rc) *os << "(rc=" << r.callback_rc << ")";
}
}  // namespace attrcheck

namespace engine_fixtures {


using namespace attrcheck;

constexpr ObjectKind kComm = ObjectKind::Comm;
constexpr ObjectKind kType = ObjectKind::Type;
constexpr ObjectKind kWin = ObjectKind::Win;
constexpr Handle kA = 0x1000, kB = 0x2000, kC = 0x3000;
constexpr Handle kSelf = 0x5E1F, kWorld = 0x3091D;
constexpr Handle kNever = 0xDEAD;  // never registered
constexpr std::uint8_t kSelfFlags = kObjectPredefined | kObjectSelf;
constexpr std::uint8_t kWorldFlags = kObjectPredefined | kObjectWorld;

constexpr Result kOk{};
inline Result R(Status s, int rc = 0) { return Result{s, rc}; }
inline std::uint64_t W(const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }
template <class T>
T deref(std::uint64_t word) {
  return *reinterpret_cast<const T*>(static_cast<std::uintptr_t>(word));
}

// One callback invocation as the native callback saw it.
struct Call {
  char which;  // 'C' copy, 'D' delete
  std::string tag;
  Handle object;
  KeyvalId keyval;
  std::uint64_t value;
  bool operator==(const Call& o) const {
    return which == o.which && tag == o.tag && object == o.object && keyval == o.keyval && value == o.value;
  }
};
inline std::ostream& operator<<(std::ostream& os, const Call& c) {
  return os << c.which << ':' << c.tag << "(obj=0x" << std::hex << c.object << std::dec << ",key=" << c.keyval
            << ",val=" << c.value << ")";
}
using Log = std::vector<Call>;

// The recorder a keyval's callbacks get as extra_state.
struct Rec {
  Rec() = default;
  Rec(Log* l, std::string t) : log(l), tag(std::move(t)) {}
  Log* log = nullptr;
  std::string tag;
  int copies = 0, deletes = 0;
  // Copy defaults: *out = in + copy_add, *flag = copy_flag, return copy_rc. Delete: del_rc.
  int copy_rc = 0, copy_flag = 1, del_rc = 0;
  std::uint64_t copy_add = 0;
  // Optional hooks, replacing the defaults.
  std::function<int(Handle, KeyvalId, std::uint64_t, std::uint64_t*, int*)> on_copy;
  std::function<int(Handle, KeyvalId, std::uint64_t)> on_del;
};

inline int rec_copy(Handle old_object, int keyval, void* extra_state, void* in, void* out, int* flag) {
  auto* r = static_cast<Rec*>(extra_state);
  ++r->copies;
  if (r->log) r->log->push_back({'C', r->tag, old_object, keyval, W(in)});
  auto* value_out = static_cast<std::uint64_t*>(out);
  if (r->on_copy) return r->on_copy(old_object, keyval, W(in), value_out, flag);
  *value_out = W(in) + r->copy_add;
  *flag = r->copy_flag;
  return r->copy_rc;
}
inline int rec_del(Handle object, int keyval, void* value, void* extra_state) {
  auto* r = static_cast<Rec*>(extra_state);
  ++r->deletes;
  if (r->log) r->log->push_back({'D', r->tag, object, keyval, W(value)});
  return r->on_del ? r->on_del(object, keyval, W(value)) : r->del_rc;
}
inline void* copy_fn() { return reinterpret_cast<void*>(&rec_copy); }
inline void* del_fn() { return reinterpret_cast<void*>(&rec_del); }

// A keyval spec whose copy and delete callbacks are the recorder's.
inline KeyvalSpec user_spec(Rec* r, ObjectKind kind = kComm) {
  KeyvalSpec s;
  s.kind = kind;
  s.copy = CopyCallback{CopyAction::User, copy_fn(), false};
  s.del = DeleteCallback{DeleteAction::User, del_fn(), false};
  s.extra_state = W(r);
  return s;
}
inline KeyvalSpec plain_spec(ObjectKind kind = kComm, CopyAction copy = CopyAction::NullCopy) {
  KeyvalSpec s;
  s.kind = kind;
  s.copy.action = copy;
  return s;
}
inline KeyvalId make_key(Engine& e, const KeyvalSpec& spec, Origin origin = 0) {
  KeyvalId k = -1;
  EXPECT_EQ(e.create_keyval(spec, &k, origin), kOk);
  return k;
}
// Sets C-bound attributes in the given order.
inline void set_all(Engine& e, ObjectKind kind, Handle h, std::vector<std::pair<KeyvalId, std::uint64_t>> kvs) {
  for (const auto& kv : kvs) EXPECT_EQ(e.set_attr(kind, h, kv.first, Binding::C, kv.second), kOk) << kv.first;
}

inline void create(Engine& e, ObjectKind kind, std::vector<Handle> hs, std::uint8_t flags = kObjectNone) {
  for (Handle h : hs) EXPECT_EQ(e.create_object(kind, h, flags), kOk) << h;
}
inline KeyvalInfo info_of(const Engine& e, KeyvalId id) {
  KeyvalInfo info;
  EXPECT_TRUE(e.keyval_info(id, &info)) << id;
  return info;
}
// The status of a C read.
inline Result try_get(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) {
  void* v = nullptr;
  int flag = 0;
  return e.get_attr(kind, h, k, Binding::C, &v, &flag);
}
// Reads an attribute as C; returns the word, or ~0 when not set.
inline std::uint64_t get_c(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) {
  void* v = nullptr;
  int flag = -1;
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::C, &v, &flag), kOk);
  return flag ? W(v) : ~std::uint64_t{0};
}
inline bool has_attr(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) { return get_c(e, kind, h, k) != ~0ull; }

// Keyvals of an object's attributes, oldest first (attributes(kind, h) is "newest last").
inline std::vector<KeyvalId> keys_of(const Engine& e, ObjectKind kind, Handle h) {
  std::vector<KeyvalId> out;
  for (const AttributeInfo& a : e.attributes(kind, h)) out.push_back(a.keyval);
  return out;
}
using Keys = std::vector<KeyvalId>;
inline std::vector<std::string> tags(const Log& log) {
  std::vector<std::string> out;
  for (const Call& c : log) out.push_back(std::string(1, c.which) + c.tag);
  return out;
}
using Tags = std::vector<std::string>;
inline bool object_registered(const Engine& e, ObjectKind kind, Handle h) {
  for (const ObjectInfo& o : e.objects())
    if (o.kind == kind && o.handle == h) return true;
  return false;
}

// Records every observer event.
struct EventLog final : Observer {
  std::vector<CallbackEvent> events;
  void on_callback(const CallbackEvent& ev) override { events.push_back(ev); }
};
inline EngineConfig observed_by(Observer* o) {
  EngineConfig cfg;
  cfg.observer = o;
  return cfg;
}
// An engine with an EventLog observer.
struct Watched {
  EventLog obs;
  Engine e{observed_by(&obs)};
};
// Checks a delete event (flag < 0) or a copy event (flag >= 0: the raw flag it returned).
inline void expect_event(const CallbackEvent& ev, CallbackCause cause, ObjectKind kind, Handle obj, KeyvalId key,
                  int rc = 0, int flag = -1, bool threw = false) {
  const auto which = flag < 0 ? CallbackEvent::Which::Delete : CallbackEvent::Which::Copy;
  EXPECT_EQ(std::make_tuple(ev.which, ev.cause, ev.kind, ev.object, ev.keyval, ev.rc, ev.threw),
            std::make_tuple(which, cause, kind, obj, key, rc, threw))
      << "cause " << to_string(ev.cause) << " / " << to_string(cause);
  if (flag >= 0) {
    EXPECT_EQ(ev.flag, flag);
  }
}


// Sees every CopyCall / DeleteCall; answers with out / flag / rc, or throws.
struct RecordingInvoker final : CallbackInvoker {
  std::vector<CopyCall> copies;
  std::vector<DeleteCall> dels;
  std::uint64_t out = 0;
  int flag = 1, rc = 0;
  bool throw_copy = false, throw_del = false;
  int copy(const CopyCall& c, std::uint64_t* value_out, int* f) override {
    copies.push_back(c);
    if (throw_copy) throw std::runtime_error("copy");
    *value_out = out;
    *f = flag;
    return rc;
  }
  int del(const DeleteCall& c) override {
    dels.push_back(c);
    if (throw_del) throw std::runtime_error("del");
    return rc;
  }
};
inline EngineConfig invoked_by(CallbackInvoker* inv, Observer* obs = nullptr) {
  EngineConfig cfg;
  cfg.invoker = inv;
  cfg.observer = obs;
  return cfg;
}

}  // namespace engine_fixtures
