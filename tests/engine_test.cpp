// engine_test: one focused test per rule of docs/engine.md.
//
// Callbacks are engine-native C functions (NativeCopyFn / NativeDeleteFn) called by the default
// NativeInvoker; each gets a `Rec` (recorder) through extra_state. Tests that need to see the
// raw CopyCall / DeleteCall (language conversion, throwing) install a RecordingInvoker instead.
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
void PrintTo(const Result& r, std::ostream* os) {
  *os << to_string(r.status);
  if (r.callback_rc) *os << "(rc=" << r.callback_rc << ")";
}
}  // namespace attrcheck

namespace {

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
Result R(Status s, int rc = 0) { return Result{s, rc}; }
std::uint64_t W(const void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); }
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
std::ostream& operator<<(std::ostream& os, const Call& c) {
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

int rec_copy(Handle old_object, int keyval, void* extra_state, void* in, void* out, int* flag) {
  auto* r = static_cast<Rec*>(extra_state);
  ++r->copies;
  if (r->log) r->log->push_back({'C', r->tag, old_object, keyval, W(in)});
  auto* value_out = static_cast<std::uint64_t*>(out);
  if (r->on_copy) return r->on_copy(old_object, keyval, W(in), value_out, flag);
  *value_out = W(in) + r->copy_add;
  *flag = r->copy_flag;
  return r->copy_rc;
}
int rec_del(Handle object, int keyval, void* value, void* extra_state) {
  auto* r = static_cast<Rec*>(extra_state);
  ++r->deletes;
  if (r->log) r->log->push_back({'D', r->tag, object, keyval, W(value)});
  return r->on_del ? r->on_del(object, keyval, W(value)) : r->del_rc;
}
void* copy_fn() { return reinterpret_cast<void*>(&rec_copy); }
void* del_fn() { return reinterpret_cast<void*>(&rec_del); }

// A keyval spec whose copy and delete callbacks are the recorder's.
KeyvalSpec user_spec(Rec* r, ObjectKind kind = kComm) {
  KeyvalSpec s;
  s.kind = kind;
  s.copy = CopyCallback{CopyAction::User, copy_fn(), false};
  s.del = DeleteCallback{DeleteAction::User, del_fn(), false};
  s.extra_state = W(r);
  return s;
}
KeyvalSpec plain_spec(ObjectKind kind = kComm, CopyAction copy = CopyAction::NullCopy) {
  KeyvalSpec s;
  s.kind = kind;
  s.copy.action = copy;
  return s;
}
KeyvalId make_key(Engine& e, const KeyvalSpec& spec, Origin origin = 0) {
  KeyvalId k = -1;
  EXPECT_EQ(e.create_keyval(spec, &k, origin), kOk);
  return k;
}
// Sets C-bound attributes in the given order.
void set_all(Engine& e, ObjectKind kind, Handle h, std::vector<std::pair<KeyvalId, std::uint64_t>> kvs) {
  for (const auto& kv : kvs) EXPECT_EQ(e.set_attr(kind, h, kv.first, Binding::C, kv.second), kOk) << kv.first;
}

void create(Engine& e, ObjectKind kind, std::vector<Handle> hs, std::uint8_t flags = kObjectNone) {
  for (Handle h : hs) EXPECT_EQ(e.create_object(kind, h, flags), kOk) << h;
}
KeyvalInfo info_of(const Engine& e, KeyvalId id) {
  KeyvalInfo info;
  EXPECT_TRUE(e.keyval_info(id, &info)) << id;
  return info;
}
// The status of a C read.
Result try_get(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) {
  void* v = nullptr;
  int flag = 0;
  return e.get_attr(kind, h, k, Binding::C, &v, &flag);
}
// Reads an attribute as C; returns the word, or ~0 when not set.
std::uint64_t get_c(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) {
  void* v = nullptr;
  int flag = -1;
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::C, &v, &flag), kOk);
  return flag ? W(v) : ~std::uint64_t{0};
}
bool has_attr(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) { return get_c(e, kind, h, k) != ~0ull; }

// Keyvals of an object's attributes, oldest first (attributes(kind, h) is "newest last").
std::vector<KeyvalId> keys_of(const Engine& e, ObjectKind kind, Handle h) {
  std::vector<KeyvalId> out;
  for (const AttributeInfo& a : e.attributes(kind, h)) out.push_back(a.keyval);
  return out;
}
using Keys = std::vector<KeyvalId>;
std::vector<std::string> tags(const Log& log) {
  std::vector<std::string> out;
  for (const Call& c : log) out.push_back(std::string(1, c.which) + c.tag);
  return out;
}
using Tags = std::vector<std::string>;
bool object_registered(const Engine& e, ObjectKind kind, Handle h) {
  for (const ObjectInfo& o : e.objects())
    if (o.kind == kind && o.handle == h) return true;
  return false;
}

// Records every observer event.
struct EventLog final : Observer {
  std::vector<CallbackEvent> events;
  void on_callback(const CallbackEvent& ev) override { events.push_back(ev); }
};
EngineConfig observed_by(Observer* o) {
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
void expect_event(const CallbackEvent& ev, CallbackCause cause, ObjectKind kind, Handle obj, KeyvalId key,
                  int rc = 0, int flag = -1, bool threw = false) {
  const auto which = flag < 0 ? CallbackEvent::Which::Delete : CallbackEvent::Which::Copy;
  EXPECT_EQ(std::make_tuple(ev.which, ev.cause, ev.kind, ev.object, ev.keyval, ev.rc, ev.threw),
            std::make_tuple(which, cause, kind, obj, key, rc, threw))
      << "cause " << to_string(ev.cause) << " / " << to_string(cause);
  if (flag >= 0) {
    EXPECT_EQ(ev.flag, flag);
  }
}

// ---- Keyvals -------------------------------------------------------------------------------

TEST(Keyval, CreateForEachKindGivesPositiveDistinctIds) {
  Engine e;
  std::set<KeyvalId> seen;
  for (ObjectKind kind : {kComm, kType, kWin}) {
    for (int i = 0; i < 3; ++i) {
      KeyvalId k = make_key(e, plain_spec(kind));
      EXPECT_GT(k, 0);
      EXPECT_TRUE(seen.insert(k).second) << "duplicate id " << k;
      KeyvalInfo info = info_of(e, k);
      EXPECT_EQ(info.id, k);
      EXPECT_EQ(info.kind, kind);
      EXPECT_FALSE(info.predefined || info.user_freed || info.destroyed);
      EXPECT_TRUE(e.is_engine_keyval(k));
    }
  }
  EXPECT_EQ(e.live_keyvals().size(), 9u);
}

TEST(Keyval, IdsNeverEqualConfiguredKeyvalInvalid) {
  EngineConfig cfg;
  cfg.keyval_invalid = 0x24000000;  // MPICH's MPI_KEYVAL_INVALID
  Engine e(cfg);
  std::vector<KeyvalId> ids;
  for (int i = 0; i < 200; ++i) {
    ids.push_back(make_key(e, plain_spec(static_cast<ObjectKind>(i % 3))));
    EXPECT_GT(ids.back(), 0);
    EXPECT_NE(ids.back(), 0x24000000);
  }
  KeyvalId k = ids[0];
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  EXPECT_EQ(k, 0x24000000);  // free writes the configured MPI_KEYVAL_INVALID
  create(e, kComm, {kA});
  EXPECT_EQ(e.set_attr(kComm, kA, 0x24000000, Binding::C, 1), R(Status::KeyvalInvalid));
  // With this configuration -1 is just an id that was never created.
  EXPECT_EQ(e.set_attr(kComm, kA, -1, Binding::C, 1), R(Status::KeyvalUnknown));
}

TEST(Keyval, NullArgumentsAreRejected) {
  Engine e;
  EXPECT_EQ(e.create_keyval(plain_spec(), nullptr), R(Status::NullArgument));
  Rec r;
  KeyvalSpec no_copy_fn = user_spec(&r), no_del_fn = user_spec(&r);
  no_copy_fn.copy.fn = nullptr;
  no_del_fn.del.fn = nullptr;
  KeyvalId k = 77;
  EXPECT_EQ(e.create_keyval(no_copy_fn, &k), R(Status::NullArgument));
  EXPECT_EQ(e.create_keyval(no_del_fn, &k), R(Status::NullArgument));
  EXPECT_EQ(e.free_keyval(kComm, nullptr), R(Status::NullArgument));
  EXPECT_TRUE(e.live_keyvals().empty());
  // A null fn is fine for the predefined actions.
  KeyvalSpec predefined_actions;
  predefined_actions.copy = CopyCallback{CopyAction::Dup, nullptr, false};
  predefined_actions.del = DeleteCallback{DeleteAction::NullDelete, nullptr, false};
  EXPECT_EQ(e.create_keyval(predefined_actions, &k), kOk);
}

TEST(Keyval, FreeSetsHandleToInvalid) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec(kWin));
  const KeyvalId original = k;
  ASSERT_EQ(e.free_keyval(kWin, &k), kOk);
  EXPECT_EQ(k, -1);
  KeyvalInfo info = info_of(e, original);
  EXPECT_TRUE(info.user_freed);
  EXPECT_TRUE(info.destroyed);  // no attribute used it
  EXPECT_EQ(info.attributes, 0u);
  EXPECT_TRUE(e.live_keyvals().empty());
}

TEST(Keyval, FreedKeyStaysAliveWhileAttributesUseIt) {
  Engine e;
  Log log;
  Rec r{&log, "k"};
  KeyvalId k = make_key(e, user_spec(&r));
  const KeyvalId id = k;
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, id, Binding::C, 10), kOk);
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  KeyvalInfo info = info_of(e, id);
  EXPECT_TRUE(info.user_freed);
  EXPECT_FALSE(info.destroyed);
  EXPECT_EQ(info.attributes, 1u);
  // Copy callback still runs on dup, delete callback on free.
  r.copy_add = 5;
  ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
  info = info_of(e, id);
  EXPECT_EQ(info.attributes, 2u);
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  ASSERT_EQ(e.free_object(kComm, kB), kOk);
  EXPECT_EQ(log, (Log{{'C', "k", kA, id, 10}, {'D', "k", kA, id, 10}, {'D', "k", kB, id, 15}}));
  info = info_of(e, id);
  EXPECT_TRUE(info.destroyed);
}

TEST(Keyval, Hdf5PatternFreedKeyDeleteCallbackRunsAtFinalize) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r{&log, "h5"};
  create(e, kComm, {kSelf}, kSelfFlags);
  KeyvalId k = make_key(e, user_spec(&r));
  const KeyvalId id = k;
  ASSERT_EQ(e.set_attr(kComm, kSelf, id, Binding::C, 0), kOk);
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);  // freed right away, as HDF5 does
  EXPECT_EQ(r.deletes, 0);
  EXPECT_TRUE(e.finalize().failures.empty());
  EXPECT_EQ(log, (Log{{'D', "h5", kSelf, id, 0}}));
  ASSERT_EQ(w.obs.events.size(), 1u);
  expect_event(w.obs.events[0], CallbackCause::Finalize, kComm, kSelf, id);
  KeyvalInfo info = info_of(e, id);
  EXPECT_TRUE(info.destroyed);
}

TEST(Keyval, DestroyedAfterLastAttributeGoes) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  const KeyvalId id = k;
  create(e, kComm, {kA, kB});
  set_all(e, kComm, kA, {{id, 1}});
  set_all(e, kComm, kB, {{id, 2}});
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  KeyvalInfo info = info_of(e, id);
  EXPECT_FALSE(info.destroyed);
  EXPECT_EQ(info.attributes, 1u);
  ASSERT_EQ(e.live_keyvals().size(), 1u);
  EXPECT_EQ(e.live_keyvals()[0].id, id);
  ASSERT_EQ(e.free_object(kComm, kB), kOk);
  info = info_of(e, id);
  EXPECT_TRUE(info.destroyed);
  EXPECT_EQ(info.attributes, 0u);
  EXPECT_TRUE(e.live_keyvals().empty());
}

TEST(Keyval, SecondFreeIsDoubleFreeAndDoesNotOverRelease) {
  // Open MPI 4.1 over-releases on the second free and later skips the delete callback.
  Engine e;
  Log log;
  Rec r{&log, "k"};
  KeyvalId k = make_key(e, user_spec(&r));
  const KeyvalId id = k;
  KeyvalId saved = k;  // the user kept a copy
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, id, Binding::C, 42), kOk);
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  EXPECT_EQ(e.free_keyval(kComm, &saved), R(Status::KeyvalDoubleFree));
  EXPECT_EQ(saved, id);  // changes nothing
  KeyvalInfo info = info_of(e, id);
  EXPECT_FALSE(info.destroyed);
  EXPECT_EQ(info.attributes, 1u);
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_EQ(log, (Log{{'D', "k", kA, id, 42}}));  // the delete callback still ran, once
  info = info_of(e, id);
  EXPECT_TRUE(info.destroyed);
  EXPECT_EQ(e.free_keyval(kComm, &saved), R(Status::KeyvalDoubleFree));  // after destruction too
}

TEST(Keyval, StaleIdIsFreedInSetGetDelete) {
  Engine e;
  create(e, kComm, {kA});
  KeyvalId k = make_key(e, plain_spec());
  const KeyvalId stale = k;
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  EXPECT_EQ(e.set_attr(kComm, kA, stale, Binding::C, 1), R(Status::KeyvalFreed));
  EXPECT_EQ(try_get(e, kComm, kA, stale), R(Status::KeyvalFreed));
  EXPECT_EQ(e.delete_attr(kComm, kA, stale), R(Status::KeyvalFreed));
  EXPECT_TRUE(e.attributes().empty());
}

TEST(Keyval, StaleIdIsStillFreedAfterSlotReuse) {
  Engine e;
  create(e, kComm, {kA});
  std::set<KeyvalId> stale;
  for (int i = 0; i < 3000; ++i) {
    KeyvalId k = make_key(e, plain_spec());
    ASSERT_EQ(stale.count(k), 0u) << "a freed id was handed out again: " << k;
    stale.insert(k);
    ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  }
  KeyvalId live = make_key(e, plain_spec());
  EXPECT_EQ(stale.count(live), 0u);
  ASSERT_EQ(e.set_attr(kComm, kA, live, Binding::C, 9), kOk);
  for (KeyvalId s : stale) {
    ASSERT_EQ(e.set_attr(kComm, kA, s, Binding::C, 1), R(Status::KeyvalFreed)) << s;
    ASSERT_EQ(try_get(e, kComm, kA, s), R(Status::KeyvalFreed)) << s;
    ASSERT_EQ(e.delete_attr(kComm, kA, s), R(Status::KeyvalFreed)) << s;
    KeyvalId copy = s;
    ASSERT_EQ(e.free_keyval(kComm, &copy), R(Status::KeyvalDoubleFree)) << s;
    ASSERT_TRUE(e.is_engine_keyval(s));
  }
  EXPECT_EQ(get_c(e, kComm, kA, live), 9u);  // the double frees did not touch the live key
  EXPECT_EQ(e.live_keyvals().size(), 1u);
}

TEST(Keyval, KeptSlotIsRenewedInPlaceOnlyOnceDestroyed) {
  // free_keyval(keep_slot) keeps the slot out of reuse; renew_keyval makes a new keyval in it (the
  // next generation), but not while attributes still use the old one; release_keyval_slot gives
  // the slot back. (attrcheck's shadow mode: the library's key names a record kept by the slot.)
  Engine e;
  Log log;
  Rec r{&log, "old"};
  create(e, kComm, {kA});
  KeyvalId k = make_key(e, user_spec(&r));
  const KeyvalId old_id = k;
  ASSERT_EQ(e.set_attr(kComm, kA, old_id, Binding::C, 10), kOk);
  ASSERT_EQ(e.free_keyval(kComm, &k, 0, /*keep_slot=*/true), kOk);
  KeyvalId renewed = 0;
  EXPECT_EQ(e.renew_keyval(old_id, plain_spec(), &renewed), R(Status::KeyvalFreed));  // attribute in use
  // The freed key still works as a freed key: its attribute is deleted through it.
  ASSERT_EQ(e.delete_attr(kComm, kA, old_id), kOk);
  EXPECT_EQ(log, (Log{{'D', "old", kA, old_id, 10}}));
  // Many creates and frees later the kept slot has not been handed to anyone else...
  std::set<KeyvalId> others;
  for (int i = 0; i < 3000; ++i) {
    KeyvalId o = make_key(e, plain_spec());
    ASSERT_NE(keyval_slot(o), keyval_slot(old_id)) << "a kept slot was reused";
    ASSERT_EQ(e.free_keyval(kComm, &o), kOk);
  }
  // ... and a renew makes the new keyval there, with the new spec and a new id.
  ASSERT_EQ(e.renew_keyval(old_id, plain_spec(kComm, CopyAction::Dup), &renewed, 7), kOk);
  EXPECT_EQ(keyval_slot(renewed), keyval_slot(old_id));
  EXPECT_NE(renewed, old_id);
  const KeyvalInfo info = info_of(e, renewed);
  EXPECT_FALSE(info.user_freed);
  EXPECT_EQ(info.spec.copy.action, CopyAction::Dup);
  EXPECT_EQ(info.created_at, 7u);
  // The old id is a stale copy, the new one a live key.
  EXPECT_EQ(e.set_attr(kComm, kA, old_id, Binding::C, 1), R(Status::KeyvalFreed));
  ASSERT_EQ(e.set_attr(kComm, kA, renewed, Binding::C, 5), kOk);
  EXPECT_EQ(get_c(e, kComm, kA, renewed), 5u);
  // A slot is renewed once per free: the renewed keyval is no longer a kept one.
  KeyvalId again = 0;
  EXPECT_EQ(e.renew_keyval(old_id, plain_spec(), &again), R(Status::KeyvalUnknown));
  EXPECT_EQ(e.renew_keyval(renewed, plain_spec(), &again), R(Status::KeyvalUnknown));
  ASSERT_EQ(e.delete_attr(kComm, kA, renewed), kOk);
}

TEST(Keyval, ReleasedKeptSlotIsReusedLikeAnyOther) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  const KeyvalId old_id = k;
  ASSERT_EQ(e.free_keyval(kComm, &k, 0, /*keep_slot=*/true), kOk);
  e.release_keyval_slot(old_id);
  KeyvalId renewed = 0;
  EXPECT_EQ(e.renew_keyval(old_id, plain_spec(), &renewed), R(Status::KeyvalUnknown));
  bool reused = false;
  for (int i = 0; i < 3000 && !reused; ++i) {
    KeyvalId o = make_key(e, plain_spec());
    reused = keyval_slot(o) == keyval_slot(old_id);
    ASSERT_EQ(e.free_keyval(kComm, &o), kOk);
  }
  EXPECT_TRUE(reused);
}

TEST(Keyval, KeptSlotsNeverTakeMoreThanAQuarterOfTheCapacity) {
  EngineConfig config;
  config.max_keyvals = 40;
  Engine e(config);
  std::vector<KeyvalId> freed;
  for (int i = 0; i < 200; ++i) {  // far more frees than slots: the slots not kept are reused
    KeyvalId k = 0;
    ASSERT_EQ(e.create_keyval(plain_spec(), &k), kOk) << i;
    freed.push_back(k);
    ASSERT_EQ(e.free_keyval(kComm, &k, 0, /*keep_slot=*/true), kOk);
  }
  int kept = 0;
  for (KeyvalId id : freed) {
    KeyvalId renewed = 0;
    if (e.renew_keyval(id, plain_spec(), &renewed).ok()) ++kept;
  }
  EXPECT_EQ(kept, 10);
}

TEST(Keyval, FreedKeyInUseStillDeletesItsAttributes) {
  // MPI_COMM_FREE_KEYVAL: freeing a key in use "is not erroneous"; the remaining references "need
  // to be explicitly freed by the program, either via calls to MPI_COMM_DELETE_ATTR ... or by calls
  // to MPI_COMM_FREE". A delete through a saved copy is legal while the key is in use, and only then.
  Engine e;
  Log log;
  Rec r{&log, "k"};
  KeyvalId k = make_key(e, user_spec(&r));
  const KeyvalId saved = k;
  create(e, kComm, {kA, kB, kC});
  set_all(e, kComm, kA, {{saved, 1}});
  set_all(e, kComm, kB, {{saved, 2}});
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  int present = -1;
  EXPECT_EQ(e.check_delete(kComm, kA, saved, &present), kOk);
  EXPECT_EQ(present, 1);
  EXPECT_EQ(e.check_delete(kComm, kC, saved, &present), kOk);  // in use elsewhere: absent here
  EXPECT_EQ(present, 0);
  EXPECT_EQ(e.delete_attr(kComm, kC, saved), R(Status::AttrAbsent));
  // Set and get through the freed key stay erroneous.
  EXPECT_EQ(e.set_attr(kComm, kC, saved, Binding::C, 3), R(Status::KeyvalFreed));
  EXPECT_EQ(try_get(e, kComm, kA, saved), R(Status::KeyvalFreed));
  EXPECT_EQ(e.check_delete(kComm, kA, saved, &present), kOk);
  EXPECT_EQ(e.delete_attr(kComm, kA, saved), kOk);
  EXPECT_EQ(e.delete_attr(kComm, kB, saved), kOk);  // the last attribute
  EXPECT_EQ(log, (Log{{'D', "k", kA, saved, 1}, {'D', "k", kB, saved, 2}}));
  EXPECT_TRUE(info_of(e, saved).destroyed);
  // Gone for good: now a delete through it is keyval.freed, and check_delete agrees.
  EXPECT_EQ(e.check_delete(kComm, kA, saved, &present), R(Status::KeyvalFreed));
  EXPECT_EQ(e.delete_attr(kComm, kA, saved), R(Status::KeyvalFreed));
}

TEST(Keyval, FreedKeyOfAnotherKindIsStillAKindMismatchOnDelete) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec(kType));
  const KeyvalId saved = k;
  create(e, kType, {kA});
  create(e, kComm, {kB});
  set_all(e, kType, kA, {{saved, 1}});
  ASSERT_EQ(e.free_keyval(kType, &k), kOk);
  EXPECT_EQ(e.delete_attr(kComm, kB, saved), R(Status::KeyvalKindMismatch));
  EXPECT_EQ(e.delete_attr(kType, kA, saved), kOk);
}

TEST(Capacity, AMillionLiveKeyvalsAndAMillionObjectsWithAttributes) {
  // No capacity of the tool may change what a program does: MPI programs may hold this many.
  Engine e;
  constexpr int kKeys = 1000000;
  std::vector<KeyvalId> keys(kKeys);
  std::set<KeyvalId> distinct;
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_EQ(e.create_keyval(plain_spec(), &keys[i]), kOk) << i;
    ASSERT_GT(keys[i], 0);
    ASSERT_NE(keys[i], -1);
  }
  distinct.insert(keys.begin(), keys.end());
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kKeys));
  create(e, kComm, {kA});
  for (int i = 0; i < kKeys; i += 1000) ASSERT_EQ(e.set_attr(kComm, kA, keys[i], Binding::C, i + 1), kOk);
  for (int i = 0; i < kKeys; i += 1000) ASSERT_EQ(get_c(e, kComm, kA, keys[i]), static_cast<std::uint64_t>(i + 1));
  // A million objects, each with an attribute.
  constexpr Handle kBase = 0x10000000;
  for (Handle h = 0; h < 1000000; ++h) {
    ASSERT_EQ(e.create_object(kType, kBase + h * 16), kOk) << h;
  }
  KeyvalId tk = 0;
  ASSERT_EQ(e.create_keyval(plain_spec(kType), &tk), kOk);
  for (Handle h = 0; h < 1000000; ++h) ASSERT_EQ(e.set_attr(kType, kBase + h * 16, tk, Binding::C, h), kOk);
  for (Handle h = 0; h < 1000000; h += 997) ASSERT_EQ(get_c(e, kType, kBase + h * 16, tk), h);
  for (int i = 0; i < kKeys; ++i) ASSERT_EQ(e.free_keyval(kComm, &keys[i]), kOk) << i;
  EXPECT_EQ(e.live_keyvals().size(), 1u + kKeys / 1000);  // the type key, and the comm keys still in use
}

TEST(Keyval, NeverCreatedIdIsUnknown) {
  Engine e;
  create(e, kComm, {kA});
  make_key(e, plain_spec());
  for (KeyvalId bogus : {0, 12345, 0x7ffffff0}) {
    EXPECT_EQ(e.set_attr(kComm, kA, bogus, Binding::C, 1), R(Status::KeyvalUnknown)) << bogus;
    EXPECT_EQ(try_get(e, kComm, kA, bogus), R(Status::KeyvalUnknown));
    EXPECT_EQ(e.delete_attr(kComm, kA, bogus), R(Status::KeyvalUnknown));
    KeyvalId k = bogus;
    EXPECT_EQ(e.free_keyval(kComm, &k), R(Status::KeyvalUnknown));
    EXPECT_EQ(k, bogus);
    EXPECT_FALSE(e.is_engine_keyval(bogus));
  }
}

TEST(Keyval, KeyvalInvalidIsRejected) {
  Engine e;
  create(e, kType, {kA});
  EXPECT_EQ(e.set_attr(kType, kA, -1, Binding::C, 1), R(Status::KeyvalInvalid));
  EXPECT_EQ(try_get(e, kType, kA, -1), R(Status::KeyvalInvalid));
  EXPECT_EQ(e.delete_attr(kType, kA, -1), R(Status::KeyvalInvalid));
  KeyvalId k = -1;
  EXPECT_EQ(e.free_keyval(kType, &k), R(Status::KeyvalInvalid));
}

TEST(Keyval, WrongKindIsKindMismatch) {
  Engine e;
  create(e, kComm, {kA});
  KeyvalId tk = make_key(e, plain_spec(kType));
  EXPECT_EQ(e.set_attr(kComm, kA, tk, Binding::C, 1), R(Status::KeyvalKindMismatch));
  EXPECT_EQ(try_get(e, kComm, kA, tk), R(Status::KeyvalKindMismatch));
  EXPECT_EQ(e.delete_attr(kComm, kA, tk), R(Status::KeyvalKindMismatch));
  KeyvalId copy = tk;
  EXPECT_EQ(e.free_keyval(kComm, &copy), R(Status::KeyvalKindMismatch));
  EXPECT_EQ(copy, tk);
  KeyvalInfo info = info_of(e, tk);
  EXPECT_FALSE(info.user_freed);
  EXPECT_EQ(e.free_keyval(kType, &copy), kOk);  // the right kind frees it
}

TEST(Keyval, PredefinedKeyvalCannotBeSetDeletedOrFreed) {
  Engine e;
  ASSERT_EQ(e.register_predefined_keyval(kComm, 0, "MPI_TAG_UB"), kOk);
  create(e, kComm, {kWorld}, kWorldFlags);
  ASSERT_EQ(e.install_predefined(kComm, kWorld, 0, Binding::FortranInt, 32767), kOk);
  EXPECT_EQ(e.set_attr(kComm, kWorld, 0, Binding::C, 1), R(Status::KeyvalPredefined));
  EXPECT_EQ(e.delete_attr(kComm, kWorld, 0), R(Status::KeyvalPredefined));
  KeyvalId k = 0;
  EXPECT_EQ(e.free_keyval(kComm, &k), R(Status::KeyvalPredefined));
  EXPECT_EQ(k, 0);
  // Reads work; an integer-valued predefined attribute reads in C as a pointer to int.
  std::int64_t aint = 0;
  int flag = 0;
  ASSERT_EQ(e.get_attr(kComm, kWorld, 0, Binding::FortranAint, &aint, &flag), kOk);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(aint, 32767);
  EXPECT_EQ(deref<std::int32_t>(get_c(e, kComm, kWorld, 0)), 32767);
  KeyvalInfo info = info_of(e, 0);
  EXPECT_TRUE(info.predefined);
  EXPECT_EQ(info.name, "MPI_TAG_UB");
  EXPECT_TRUE(e.leaked_keyvals().empty());
  EXPECT_TRUE(e.live_keyvals().empty());  // only user keyvals are listed
}

TEST(Keyval, CreateNeverReturnsAPredefinedId) {
  Engine e;
  for (KeyvalId id = 1; id <= 16; ++id) ASSERT_EQ(e.register_predefined_keyval(kComm, id, "PREDEF"), kOk);
  for (int i = 0; i < 32; ++i) {
    KeyvalId k = make_key(e, plain_spec());
    EXPECT_GT(k, 16) << k;
  }
}

TEST(Keyval, Mpi1KeyvalIsACommKeyval) {
  Engine e;
  KeyvalSpec s = plain_spec(kComm);
  s.mpi1 = true;
  s.lang = Binding::FortranInt;
  KeyvalId k = make_key(e, s);
  KeyvalInfo info = info_of(e, k);
  EXPECT_EQ(info.kind, kComm);
  EXPECT_TRUE(info.spec.mpi1);
  create(e, kComm, {kA});
  create(e, kType, {kA});
  EXPECT_EQ(e.set_attr(kComm, kA, k, Binding::FortranInt, 3), kOk);
  EXPECT_EQ(e.set_attr(kType, kA, k, Binding::FortranInt, 3), R(Status::KeyvalKindMismatch));
  EXPECT_EQ(e.free_keyval(kComm, &k), kOk);  // MPI_Keyval_free is a Comm free
}

TEST(Keyval, DeprecatedPredefinedCallbacksBehaveLikeMpi2Ones) {
  Watched w;
  Engine& e = w.e;
  KeyvalSpec dup;  // MPI_DUP_FN / MPI_NULL_DELETE_FN
  dup.copy = CopyCallback{CopyAction::Dup, nullptr, true};
  dup.del = DeleteCallback{DeleteAction::NullDelete, nullptr, true};
  dup.mpi1 = true;
  KeyvalSpec null_copy = dup;  // MPI_NULL_COPY_FN
  null_copy.copy = CopyCallback{CopyAction::NullCopy, nullptr, true};
  KeyvalId kd = make_key(e, dup), kn = make_key(e, null_copy);
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{kd, 0xABC}, {kn, 0xDEF}});
  ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
  EXPECT_EQ(get_c(e, kComm, kB, kd), 0xABCu);
  EXPECT_FALSE(has_attr(e, kComm, kB, kn));
  EXPECT_EQ(e.delete_attr(kComm, kA, kd), kOk);
  EXPECT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_EQ(e.free_object(kComm, kB), kOk);
  EXPECT_TRUE(w.obs.events.empty());  // performed by the engine: no callbacks, no events
  EXPECT_TRUE(e.attributes().empty());
}

TEST(Keyval, KeyvalInfoReportsSpecAndOrigins) {
  Engine e;
  Rec r;
  KeyvalSpec s = user_spec(&r, kWin);
  s.lang = Binding::FortranAint;
  KeyvalId k = make_key(e, s, /*origin=*/11);
  const KeyvalId id = k;
  KeyvalId saved = k;
  create(e, kWin, {kA});
  ASSERT_EQ(e.set_attr(kWin, kA, id, Binding::FortranAint, 5), kOk);
  ASSERT_EQ(e.free_keyval(kWin, &k, /*origin=*/22), kOk);
  ASSERT_EQ(e.free_keyval(kWin, &saved, /*origin=*/33), R(Status::KeyvalDoubleFree));
  KeyvalInfo info = info_of(e, id);
  const KeyvalSpec& sp = info.spec;
  EXPECT_EQ(std::make_tuple(info.id, info.kind, sp.kind, sp.copy.action, sp.copy.fn, sp.del.action, sp.del.fn),
            std::make_tuple(id, kWin, kWin, CopyAction::User, copy_fn(), DeleteAction::User, del_fn()));
  EXPECT_EQ(std::make_tuple(sp.extra_state, sp.lang, sp.mpi1),
            std::make_tuple(W(&r), Binding::FortranAint, false));
  EXPECT_EQ(info.created_at, 11u);
  EXPECT_EQ(info.freed_at, 22u);  // the first free
  EXPECT_EQ(std::make_tuple(info.user_freed, info.destroyed, info.attributes),
            std::make_tuple(true, false, 1u));
  EXPECT_FALSE(e.keyval_info(4242, &info));
}

// ---- Attributes ----------------------------------------------------------------------------

TEST(Attr, SetThenGetReturnsTheValue) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec(kType));
  ASSERT_EQ(e.create_object(kType, kA, kObjectNone, /*origin=*/3), kOk);
  ASSERT_EQ(e.set_attr(kType, kA, k, Binding::C, 0x1234, /*origin=*/7), kOk);
  void* v = nullptr;
  int flag = 0;
  ASSERT_EQ(e.get_attr(kType, kA, k, Binding::C, &v, &flag), kOk);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(W(v), 0x1234u);
  std::vector<AttributeInfo> all = e.attributes();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, kType);
  EXPECT_EQ(all[0].object, kA);
  EXPECT_EQ(all[0].keyval, k);
  EXPECT_EQ(all[0].repr, Binding::C);
  EXPECT_EQ(all[0].value, 0x1234u);
  EXPECT_EQ(all[0].set_at, 7u);
  EXPECT_EQ(all[0].object_created_at, 3u);
  EXPECT_FALSE(all[0].predefined);
}

TEST(Attr, GetOfUnsetGivesFlagZeroAndLeavesOutputUntouched) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  void* v = reinterpret_cast<void*>(0x5555);
  std::int64_t aint = 66;
  std::int32_t fint = 77;
  int f1 = 1, f2 = 1, f3 = 1;
  ASSERT_EQ(e.get_attr(kComm, kA, k, Binding::C, &v, &f1), kOk);
  ASSERT_EQ(e.get_attr(kComm, kA, k, Binding::FortranAint, &aint, &f2), kOk);
  ASSERT_EQ(e.get_attr(kComm, kA, k, Binding::FortranInt, &fint, &f3), kOk);
  EXPECT_EQ(f1 + f2 + f3, 0);
  EXPECT_EQ(W(v), 0x5555u);
  EXPECT_EQ(aint, 66);
  EXPECT_EQ(fint, 77);
}

TEST(Attr, ReplaceRunsDeleteOnOldValueAndNewValueBecomesNewest) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {k2, 2}});
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k1, k2}));
  ASSERT_EQ(e.set_attr(kComm, kA, k1, Binding::C, 3), kOk);
  EXPECT_EQ(log, (Log{{'D', "k1", kA, k1, 1}}));
  ASSERT_EQ(w.obs.events.size(), 1u);
  expect_event(w.obs.events[0], CallbackCause::Set, kComm, kA, k1);
  EXPECT_EQ(get_c(e, kComm, kA, k1), 3u);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k2, k1}));
  std::vector<AttributeInfo> attrs = e.attributes(kComm, kA);
  EXPECT_GT(attrs[1].order, attrs[0].order);
}

TEST(Attr, FailingDeleteOnReplaceKeepsOldValueAndReturnsCallbackRc) {
  Engine e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {k2, 2}});
  r1.del_rc = 42;
  EXPECT_EQ(e.set_attr(kComm, kA, k1, Binding::FortranAint, 3), R(Status::CallbackFailed, 42));
  EXPECT_EQ(log, (Log{{'D', "k1", kA, k1, 1}}));
  EXPECT_EQ(get_c(e, kComm, kA, k1), 1u);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k1, k2}));  // order unchanged
  EXPECT_EQ(e.attributes(kComm, kA)[0].repr, Binding::C);
}

TEST(Attr, DeleteRunsTheDeleteCallback) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r(&log, "k");
  KeyvalId k = make_key(e, user_spec(&r, kWin));
  create(e, kWin, {kA});
  ASSERT_EQ(e.set_attr(kWin, kA, k, Binding::C, 99), kOk);
  ASSERT_EQ(e.delete_attr(kWin, kA, k), kOk);
  EXPECT_EQ(log, (Log{{'D', "k", kA, k, 99}}));
  ASSERT_EQ(w.obs.events.size(), 1u);
  expect_event(w.obs.events[0], CallbackCause::Delete, kWin, kA, k);
  EXPECT_FALSE(has_attr(e, kWin, kA, k));
  KeyvalInfo info = info_of(e, k);
  EXPECT_EQ(info.attributes, 0u);
}

TEST(Attr, FailingDeleteKeepsTheAttribute) {
  Engine e;
  Rec r;
  r.del_rc = 13;
  KeyvalId k = make_key(e, user_spec(&r));
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 99), kOk);
  EXPECT_EQ(e.delete_attr(kComm, kA, k), R(Status::CallbackFailed, 13));
  EXPECT_EQ(r.deletes, 1);
  EXPECT_EQ(get_c(e, kComm, kA, k), 99u);
  r.del_rc = 0;
  EXPECT_EQ(e.delete_attr(kComm, kA, k), kOk);
  EXPECT_FALSE(has_attr(e, kComm, kA, k));
}

TEST(Attr, DeleteOfAbsentIsAttrAbsent) {
  Engine e;
  Rec r;
  KeyvalId k = make_key(e, user_spec(&r));
  create(e, kComm, {kA});
  EXPECT_EQ(e.delete_attr(kComm, kA, k), R(Status::AttrAbsent));
  EXPECT_EQ(r.deletes, 0);
}

TEST(Attr, GetRejectsNullOutputs) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  void* v = nullptr;
  int flag = 0;
  EXPECT_EQ(e.get_attr(kComm, kA, k, Binding::C, nullptr, &flag), R(Status::NullArgument));
  EXPECT_EQ(e.get_attr(kComm, kA, k, Binding::C, &v, nullptr), R(Status::NullArgument));
  // NullArgument is checked before the object and the keyval.
  EXPECT_EQ(e.get_attr(kComm, kNever, -1, Binding::C, &v, nullptr), R(Status::NullArgument));
}

TEST(Attr, NullAndUnknownObjectsAreRejected) {
  EngineConfig cfg;
  cfg.null_handle[0] = 0xC0;
  cfg.null_handle[1] = 0xD0;
  cfg.null_handle[2] = 0xE0;
  Engine e(cfg);
  for (ObjectKind kind : {kComm, kType, kWin}) {
    SCOPED_TRACE(to_string(kind));
    const Handle null = cfg.null_handle[static_cast<int>(kind)];
    KeyvalId k = make_key(e, plain_spec(kind));
    EXPECT_EQ(e.create_object(kind, null), R(Status::ObjectNull));
    EXPECT_EQ(e.set_attr(kind, null, k, Binding::C, 1), R(Status::ObjectNull));
    EXPECT_EQ(try_get(e, kind, null, k), R(Status::ObjectNull));
    EXPECT_EQ(e.delete_attr(kind, null, k), R(Status::ObjectNull));
    EXPECT_EQ(e.free_object(kind, null), R(Status::ObjectNull));
    EXPECT_EQ(e.set_attr(kind, kNever, k, Binding::C, 1), R(Status::ObjectUnknown));
    EXPECT_EQ(try_get(e, kind, kNever, k), R(Status::ObjectUnknown));
    EXPECT_EQ(e.delete_attr(kind, kNever, k), R(Status::ObjectUnknown));
    EXPECT_EQ(e.free_object(kind, kNever), R(Status::ObjectUnknown));
    // The object is checked before the keyval.
    EXPECT_EQ(e.set_attr(kind, kNever, -1, Binding::C, 1), R(Status::ObjectUnknown));
    EXPECT_EQ(e.set_attr(kind, null, -1, Binding::C, 1), R(Status::ObjectNull));
  }
  EXPECT_EQ(e.create_object(kComm, 0), kOk);  // 0 is ordinary when it is not the configured null
  EXPECT_EQ(e.create_object(kComm, 0), R(Status::ObjectExists));
  create(e, kComm, {kA});
  EXPECT_EQ(e.free_object(kType, kA), R(Status::ObjectUnknown));  // handles are per kind
}

TEST(Attr, FreedObjectIsUnknown) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), R(Status::ObjectUnknown));
  EXPECT_EQ(try_get(e, kComm, kA, k), R(Status::ObjectUnknown));
  EXPECT_EQ(e.delete_attr(kComm, kA, k), R(Status::ObjectUnknown));
  EXPECT_EQ(e.free_object(kComm, kA), R(Status::ObjectUnknown));
  EXPECT_TRUE(e.attributes().empty());
  ASSERT_EQ(e.create_object(kComm, kA), kOk);  // the handle may be reused; it starts empty
  EXPECT_FALSE(has_attr(e, kComm, kA, k));
}

// ---- Dup -----------------------------------------------------------------------------------

TEST(Dup, CopyCallbacksRunOldestFirstWithOldHandle) {
  Engine e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2"), r3(&log, "k3");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2)),
           k3 = make_key(e, user_spec(&r3));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k3, 30}, {k1, 10}, {k2, 20}});  // set order differs from creation order
  ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
  EXPECT_EQ(log, (Log{{'C', "k3", kA, k3, 30}, {'C', "k1", kA, k1, 10}, {'C', "k2", kA, k2, 20}}));
  EXPECT_EQ(keys_of(e, kComm, kB), (Keys{k3, k1, k2}));
}

TEST(Dup, CopyFlagDecidesWhetherTheAttributeIsCopied) {
  Watched w;
  Engine& e = w.e;
  Rec r0, r1, r7;
  r0.copy_flag = 0;
  r1.copy_flag = 1;
  r1.copy_add = 100;
  r7.copy_flag = 7;  // suspicious, but "anything else" means copied
  r7.copy_add = 1000;
  KeyvalId k0 = make_key(e, user_spec(&r0, kType)), k1 = make_key(e, user_spec(&r1, kType)),
           k7 = make_key(e, user_spec(&r7, kType));
  create(e, kType, {kA});
  set_all(e, kType, kA, {{k0, 1}, {k1, 2}, {k7, 3}});
  ASSERT_EQ(e.dup_object(kType, kA, kB), kOk);
  EXPECT_FALSE(has_attr(e, kType, kB, k0));
  EXPECT_EQ(get_c(e, kType, kB, k1), 102u);
  EXPECT_EQ(get_c(e, kType, kB, k7), 1003u);
  EXPECT_EQ(keys_of(e, kType, kB), (Keys{k1, k7}));
  EXPECT_EQ(get_c(e, kType, kA, k1), 2u);  // the old object is unchanged
  ASSERT_EQ(w.obs.events.size(), 3u);
  expect_event(w.obs.events[0], CallbackCause::Dup, kType, kA, k0, 0, /*flag=*/0);
  expect_event(w.obs.events[1], CallbackCause::Dup, kType, kA, k1, 0, /*flag=*/1);
  expect_event(w.obs.events[2], CallbackCause::Dup, kType, kA, k7, 0, /*flag=*/7);
}

TEST(Dup, DupActionCopiesValueAndRepresentationNullCopyCopiesNothing) {
  Engine e;
  KeyvalId kdup = make_key(e, plain_spec(kWin, CopyAction::Dup)),
           kdup2 = make_key(e, plain_spec(kWin, CopyAction::Dup)),
           knull = make_key(e, plain_spec(kWin, CopyAction::NullCopy));
  create(e, kWin, {kA});
  ASSERT_EQ(e.set_attr(kWin, kA, kdup, Binding::FortranInt, 0xFFFFFFFF), kOk);
  ASSERT_EQ(e.set_attr(kWin, kA, knull, Binding::C, 5), kOk);
  ASSERT_EQ(e.set_attr(kWin, kA, kdup2, Binding::FortranAint, 1ull << 40), kOk);
  ASSERT_EQ(e.dup_object(kWin, kA, kB), kOk);
  std::vector<AttributeInfo> b = e.attributes(kWin, kB);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].keyval, kdup);
  EXPECT_EQ(b[0].repr, Binding::FortranInt);
  EXPECT_EQ(b[0].value, ~std::uint64_t{0});  // -1, sign-extended
  EXPECT_EQ(b[1].keyval, kdup2);
  EXPECT_EQ(b[1].repr, Binding::FortranAint);
  EXPECT_EQ(b[1].value, 1ull << 40);
  EXPECT_EQ(deref<std::int32_t>(get_c(e, kWin, kB, kdup)), -1);
}

TEST(Dup, CopiesKeepRelativeOrder) {
  Engine e;
  Rec skip;
  skip.copy_flag = 0;
  std::vector<KeyvalId> ks;
  for (int i = 0; i < 6; ++i)
    ks.push_back(make_key(e, i == 2 ? user_spec(&skip) : plain_spec(kComm, CopyAction::Dup)));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{ks[4], 4}, {ks[1], 1}, {ks[2], 2}, {ks[5], 5}, {ks[0], 0}, {ks[3], 3}});
  ASSERT_EQ(e.set_attr(kComm, kA, ks[1], Binding::C, 11), kOk);  // re-set: newest
  ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
  EXPECT_EQ(keys_of(e, kComm, kB), (Keys{ks[4], ks[5], ks[0], ks[3], ks[1]}));
  ASSERT_EQ(e.dup_object(kComm, kB, kC), kOk);
  EXPECT_EQ(keys_of(e, kComm, kC), keys_of(e, kComm, kB));
}

// Set order is kept whatever the spread of the objects' set counters: attributes set once (dense
// orders), re-set a few times (gaps), or re-set many times (orders far apart: the engine sorts).
TEST(Dup, CopyAndFreeFollowSetOrderWhateverTheGapsBetweenSets) {
  for (const int resets : {0, 5, 40, 2000}) {
    SCOPED_TRACE(resets);
    Engine e;
    Log log;
    std::vector<Rec> recs;
    recs.reserve(12);
    for (int i = 0; i < 12; ++i) recs.emplace_back(&log, "k" + std::to_string(i));
    std::vector<KeyvalId> ks;
    for (Rec& r : recs) ks.push_back(make_key(e, user_spec(&r)));
    create(e, kComm, {kA});
    std::vector<KeyvalId> order;  // the model: oldest first
    auto set = [&](KeyvalId k, std::uint64_t v) {
      ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, v), kOk);
      order.erase(std::remove(order.begin(), order.end(), k), order.end());
      order.push_back(k);
    };
    for (int i = 0; i < 12; ++i) set(ks[(i * 5) % 12], 100 + i);
    std::mt19937 rng(resets);
    for (int i = 0; i < resets; ++i) set(ks[rng() % 12], 1000 + i);
    // A deleted attribute leaves a gap too.
    ASSERT_EQ(e.delete_attr(kComm, kA, order[3]), kOk);
    order.erase(order.begin() + 3);
    log.clear();
    ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
    Tags copies;
    for (const KeyvalId k : order) copies.push_back("Ck" + std::to_string(std::find(ks.begin(), ks.end(), k) - ks.begin()));
    EXPECT_EQ(tags(log), copies);
    EXPECT_EQ(keys_of(e, kComm, kB), order);
    log.clear();
    ASSERT_EQ(e.free_object(kComm, kA), kOk);
    Tags deletes;
    for (auto k = order.rbegin(); k != order.rend(); ++k)
      deletes.push_back("Dk" + std::to_string(std::find(ks.begin(), ks.end(), *k) - ks.begin()));
    EXPECT_EQ(tags(log), deletes);
    log.clear();
    ASSERT_EQ(e.free_object(kComm, kB), kOk);  // the copies: dense orders, same order
    EXPECT_EQ(tags(log), deletes);
  }
}

TEST(Dup, PredefinedAttributesCopiedOnlyWithCopyOnDup) {
  Engine e;
  ASSERT_EQ(e.register_predefined_keyval(kComm, 1, "COPIED", /*copy_on_dup=*/true), kOk);
  ASSERT_EQ(e.register_predefined_keyval(kComm, 2, "NOT_COPIED", /*copy_on_dup=*/false), kOk);
  create(e, kComm, {kWorld}, kWorldFlags);
  ASSERT_EQ(e.install_predefined(kComm, kWorld, 1, Binding::FortranInt, 32767), kOk);
  ASSERT_EQ(e.install_predefined(kComm, kWorld, 2, Binding::C, 0xBA5E), kOk);
  ASSERT_EQ(e.dup_object(kComm, kWorld, kA), kOk);
  std::vector<AttributeInfo> a = e.attributes(kComm, kA);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].keyval, 1);
  EXPECT_EQ(a[0].repr, Binding::FortranInt);
  EXPECT_EQ(a[0].value, 32767u);
  EXPECT_TRUE(a[0].predefined);
  EXPECT_FALSE(has_attr(e, kComm, kA, 2));
}

TEST(Dup, FailingCopyCallbackDeletesCopiesAndFailsDup) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec ra(&log, "a"), rb(&log, "b"), rc(&log, "c"), rd(&log, "d");
  KeyvalSpec sa = user_spec(&ra);
  sa.copy = CopyCallback{CopyAction::Dup, nullptr, false};  // engine copy, user delete
  KeyvalId ka = make_key(e, sa), kb = make_key(e, user_spec(&rb)), kc = make_key(e, user_spec(&rc)),
           kd = make_key(e, user_spec(&rd));
  rb.copy_add = 1;
  rc.copy_rc = 9;
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{ka, 10}, {kb, 20}, {kc, 30}, {kd, 40}});
  const std::vector<AttributeInfo> before = e.attributes(kComm, kA);

  EXPECT_EQ(e.dup_object(kComm, kA, kB), R(Status::CallbackFailed, 9));
  // b copied, c failed, d never tried; then the copies are deleted newest first on the new handle.
  EXPECT_EQ(log, (Log{{'C', "b", kA, kb, 20}, {'C', "c", kA, kc, 30}, {'D', "b", kB, kb, 21},
                      {'D', "a", kB, ka, 10}}));
  ASSERT_EQ(w.obs.events.size(), 4u);
  expect_event(w.obs.events[1], CallbackCause::Dup, kComm, kA, kc, 9, /*flag=*/1);
  expect_event(w.obs.events[2], CallbackCause::DupRollback, kComm, kB, kb);
  expect_event(w.obs.events[3], CallbackCause::DupRollback, kComm, kB, ka);
  EXPECT_EQ(try_get(e, kComm, kB, ka), R(Status::ObjectUnknown));
  EXPECT_FALSE(object_registered(e, kComm, kB));
  const std::vector<AttributeInfo> after = e.attributes(kComm, kA);
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].keyval, before[i].keyval);
    EXPECT_EQ(after[i].value, before[i].value);
    EXPECT_EQ(after[i].order, before[i].order);
  }
  KeyvalInfo info = info_of(e, kb);
  EXPECT_EQ(info.attributes, 1u);
  rc.copy_rc = 0;  // once the callback succeeds the same handle can be used
  EXPECT_EQ(e.dup_object(kComm, kA, kB), kOk);
  EXPECT_EQ(keys_of(e, kComm, kB), (Keys{ka, kb, kc, kd}));
}

TEST(Dup, OntoALiveHandleIsObjectExists) {
  Engine e;
  Rec r;
  KeyvalId k = make_key(e, user_spec(&r));
  create(e, kComm, {kA, kB});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  EXPECT_EQ(e.dup_object(kComm, kA, kB), R(Status::ObjectExists));
  EXPECT_EQ(e.dup_object(kComm, kA, kA), R(Status::ObjectExists));
  EXPECT_EQ(r.copies, 0);
  EXPECT_FALSE(has_attr(e, kComm, kB, k));
}

TEST(Dup, OfUnknownOrNullObjectFails) {
  EngineConfig cfg;
  cfg.null_handle[static_cast<int>(kType)] = 0xD0;
  Engine e(cfg);
  create(e, kType, {kA});
  EXPECT_EQ(e.dup_object(kType, kNever, kB), R(Status::ObjectUnknown));
  EXPECT_EQ(e.dup_object(kType, 0xD0, kB), R(Status::ObjectNull));
  EXPECT_EQ(e.dup_object(kType, kA, 0xD0), R(Status::ObjectNull));
  EXPECT_EQ(e.dup_object(kType, kNever, kA), R(Status::ObjectUnknown));  // old object first
  EXPECT_FALSE(object_registered(e, kType, kB));
}

// ---- Free ----------------------------------------------------------------------------------

TEST(Free, DeleteCallbacksRunNewestFirst) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2"), r3(&log, "k3");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2)),
           k3 = make_key(e, user_spec(&r3));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {k2, 2}, {k3, 3}, {k1, 4}});  // re-setting k1 makes it newest
  log.clear();
  w.obs.events.clear();
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_EQ(log, (Log{{'D', "k1", kA, k1, 4}, {'D', "k3", kA, k3, 3}, {'D', "k2", kA, k2, 2}}));
  ASSERT_EQ(w.obs.events.size(), 3u);
  expect_event(w.obs.events[0], CallbackCause::Free, kComm, kA, k1);
  expect_event(w.obs.events[2], CallbackCause::Free, kComm, kA, k2);
  EXPECT_FALSE(object_registered(e, kComm, kA));
}

TEST(Free, FailingDeleteCallbackStopsTheFree) {
  Engine e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2"), r3(&log, "k3"), r4(&log, "k4");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2)),
           k3 = make_key(e, user_spec(&r3)), k4 = make_key(e, user_spec(&r4));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {k2, 2}, {k3, 3}, {k4, 4}});
  r2.del_rc = 17;
  EXPECT_EQ(e.free_object(kComm, kA), R(Status::CallbackFailed, 17));
  EXPECT_EQ(tags(log), (Tags{"Dk4", "Dk3", "Dk2"}));
  EXPECT_TRUE(object_registered(e, kComm, kA));
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k1, k2}));
  EXPECT_EQ(get_c(e, kComm, kA, k1), 1u);
  log.clear();
  r2.del_rc = 0;
  EXPECT_EQ(e.free_object(kComm, kA), kOk);  // freed later, once the callback succeeds
  EXPECT_EQ(tags(log), (Tags{"Dk2", "Dk1"}));
  EXPECT_FALSE(object_registered(e, kComm, kA));
}

TEST(Free, PredefinedObjectIsObjectPredefined) {
  Engine e;
  Rec r;
  KeyvalId k = make_key(e, user_spec(&r));
  create(e, kComm, {kWorld}, kWorldFlags);
  ASSERT_EQ(e.set_attr(kComm, kWorld, k, Binding::C, 1), kOk);
  EXPECT_EQ(e.free_object(kComm, kWorld), R(Status::ObjectPredefined));
  EXPECT_EQ(r.deletes, 0);
  EXPECT_EQ(get_c(e, kComm, kWorld, k), 1u);
}

// ---- Finalize ------------------------------------------------------------------------------

TEST(Finalize, SelfAttributesDeletedNewestFirstContinuingPastFailures) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2"), r3(&log, "k3");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2)),
           k3 = make_key(e, user_spec(&r3));
  create(e, kComm, {kSelf}, kSelfFlags);
  set_all(e, kComm, kSelf, {{k1, 1}, {k2, 2}, {k3, 3}});
  r2.del_rc = 5;
  FinalizeReport rep = e.finalize();
  EXPECT_EQ(tags(log), (Tags{"Dk3", "Dk2", "Dk1"}));
  ASSERT_EQ(rep.failures.size(), 1u);
  EXPECT_EQ(rep.failures[0].kind, kComm);
  EXPECT_EQ(rep.failures[0].object, kSelf);
  EXPECT_EQ(rep.failures[0].keyval, k2);
  EXPECT_EQ(rep.failures[0].result, R(Status::CallbackFailed, 5));
  ASSERT_EQ(w.obs.events.size(), 3u);
  expect_event(w.obs.events[0], CallbackCause::Finalize, kComm, kSelf, k3);
  expect_event(w.obs.events[1], CallbackCause::Finalize, kComm, kSelf, k2, 5);
  expect_event(w.obs.events[2], CallbackCause::Finalize, kComm, kSelf, k1);
  EXPECT_EQ(keys_of(e, kComm, kSelf), (Keys{k2}));  // the failing attribute stays, as a leak
  EXPECT_EQ(e.attributes().size(), 1u);
  EXPECT_TRUE(e.finalized());
}

TEST(Finalize, WorldAttributesOnlyWithDeleteWorldAttributes) {
  for (bool world : {false, true}) {
    SCOPED_TRACE(world);
    Engine e;
    Log log;
    Rec rs(&log, "self"), rw(&log, "world");
    KeyvalId ks = make_key(e, user_spec(&rs)), kw = make_key(e, user_spec(&rw));
    create(e, kComm, {kWorld}, kWorldFlags);
    create(e, kComm, {kSelf}, kSelfFlags);
    create(e, kComm, {kA});
    set_all(e, kComm, kWorld, {{kw, 1}});  // set first, deleted last
    set_all(e, kComm, kSelf, {{ks, 2}});
    set_all(e, kComm, kA, {{ks, 3}});  // ordinary objects: never
    FinalizeOptions opt;
    opt.delete_world_attributes = world;
    EXPECT_TRUE(e.finalize(opt).failures.empty());
    if (world) {
      EXPECT_EQ(log, (Log{{'D', "self", kSelf, ks, 2}, {'D', "world", kWorld, kw, 1}}));
    } else {
      EXPECT_EQ(log, (Log{{'D', "self", kSelf, ks, 2}}));
    }
    EXPECT_EQ(e.attributes().size(), world ? 1u : 2u);
  }
}

TEST(Finalize, CallbacksMayCallTheEngineWhileFinalizeRuns) {
  Engine e;
  Rec r;
  KeyvalId other = make_key(e, plain_spec());
  create(e, kComm, {kSelf}, kSelfFlags);
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, other, Binding::C, 5), kOk);
  std::vector<Result> results;
  std::uint64_t seen = 0;
  KeyvalId created = -1;
  r.on_del = [&](Handle, KeyvalId, std::uint64_t) {
    seen = get_c(e, kComm, kA, other);
    results.push_back(e.set_attr(kComm, kA, other, Binding::C, 6));
    results.push_back(e.create_keyval(plain_spec(), &created));
    results.push_back(e.create_object(kComm, kB));
    results.push_back(e.free_object(kComm, kB));
    return 0;
  };
  KeyvalId k = make_key(e, user_spec(&r));
  ASSERT_EQ(e.set_attr(kComm, kSelf, k, Binding::C, 1), kOk);
  EXPECT_TRUE(e.finalize().failures.empty());
  EXPECT_EQ(r.deletes, 1);
  EXPECT_EQ(results, std::vector<Result>(4, kOk));
  EXPECT_EQ(seen, 5u);
  EXPECT_GT(created, 0);
  std::vector<AttributeInfo> left = e.attributes();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].value, 6u);
}

TEST(Finalize, EveryCallAfterwardsReturnsFinalized) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  EXPECT_FALSE(e.finalized());
  e.finalize();
  EXPECT_TRUE(e.finalized());
  const Result fin = R(Status::Finalized);
  KeyvalId nk = 0, copy = k;
  EXPECT_EQ(e.create_keyval(plain_spec(), &nk), fin);
  EXPECT_EQ(e.create_keyval(plain_spec(), nullptr), fin);  // Finalized is checked first
  EXPECT_EQ(e.free_keyval(kComm, &copy), fin);
  EXPECT_EQ(copy, k);
  EXPECT_EQ(e.register_predefined_keyval(kComm, 500, "X"), fin);
  EXPECT_EQ(e.create_object(kComm, kB), fin);
  EXPECT_EQ(e.dup_object(kComm, kA, kB), fin);
  EXPECT_EQ(e.free_object(kComm, kA), fin);
  EXPECT_EQ(e.set_attr(kComm, kA, k, Binding::C, 2), fin);
  EXPECT_EQ(try_get(e, kComm, kA, k), fin);
  EXPECT_EQ(e.get_attr(kComm, kA, k, Binding::C, nullptr, nullptr), fin);
  EXPECT_EQ(e.delete_attr(kComm, kA, k), fin);
  EXPECT_EQ(e.install_predefined(kComm, kA, k, Binding::C, 3), fin);
  // Introspection still works and nothing changed.
  std::vector<AttributeInfo> left = e.attributes();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].value, 1u);
  EXPECT_TRUE(object_registered(e, kComm, kA));
}

TEST(Finalize, LeakedKeyvalsListsUserKeyvalsNeverFreed) {
  Engine e;
  ASSERT_EQ(e.register_predefined_keyval(kComm, 0, "MPI_TAG_UB"), kOk);
  KeyvalId freed = make_key(e, plain_spec()), used = make_key(e, plain_spec(kWin)),
           unused = make_key(e, plain_spec(kType), /*origin=*/3), freed_used = make_key(e, plain_spec());
  const KeyvalId fu = freed_used;
  create(e, kComm, {kA});
  create(e, kWin, {kA});
  set_all(e, kWin, kA, {{used, 1}});
  set_all(e, kComm, kA, {{freed_used, 2}});
  ASSERT_EQ(e.free_keyval(kComm, &freed), kOk);
  ASSERT_EQ(e.free_keyval(kComm, &freed_used), kOk);
  e.finalize();
  std::vector<KeyvalId> ids;
  for (const KeyvalInfo& i : e.leaked_keyvals()) {
    ids.push_back(i.id);
    EXPECT_EQ(i.created_at, i.id == unused ? 3u : 0u);
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (Keys{std::min(used, unused), std::max(used, unused)}));
  // What remains: the attributes on the objects nobody freed.
  std::set<KeyvalId> left;
  for (const AttributeInfo& a : e.attributes()) left.insert(a.keyval);
  EXPECT_EQ(left, (std::set<KeyvalId>{used, fu}));
  EXPECT_EQ(e.attributes().size(), 2u);
}

// ---- Language interoperability -------------------------------------------------------------

// An attribute read in all three bindings.
struct Reads {
  std::uint64_t c = 0;  // the void* word
  std::int64_t aint = 0;
  std::int32_t fint = 0;
  bool truncated = false;
};
Reads read_all(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) {
  Reads r;
  void* p = nullptr;
  int f1 = 0, f2 = 0, f3 = 0;
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::C, &p, &f1), kOk);
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::FortranAint, &r.aint, &f2), kOk);
  EXPECT_EQ(e.get_attr(kind, h, k, Binding::FortranInt, &r.fint, &f3, &r.truncated), kOk);
  EXPECT_EQ(f1 + f2 + f3, 3);
  r.c = W(p);
  return r;
}

int some_int = 3;
const std::uint64_t kAddr = W(&some_int);
const std::int32_t kAddrLow = static_cast<std::int32_t>(static_cast<std::uint32_t>(kAddr));
const bool kAddrTruncates = static_cast<std::int64_t>(kAddrLow) != static_cast<std::int64_t>(kAddr);
constexpr std::uint64_t kMinus5 = ~std::uint64_t{4};  // -5 as a word

// One row of the interop table: the word set, and its low 32 bits as FortranInt reads them.
struct Row {
  std::uint64_t set;
  std::int32_t low;
  bool truncates;  // the low 32 bits do not sign-extend back to the word
};
const std::vector<Row>& rows() {
  static const std::vector<Row> r{{17, 17, false},          {kMinus5, -5, false},
                                  {1ull << 40, 0, true},     {kAddr, kAddrLow, kAddrTruncates},
                                  {0x7fffffff, 0x7fffffff, false}, {0x80000000, INT32_MIN, true}};
  return r;
}

TEST(Interop, SetFromCReadInEveryBinding) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.set);
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, row.set), kOk);
    Reads r = read_all(e, kComm, kA, k);
    EXPECT_EQ(r.c, row.set);                                 // the address
    EXPECT_EQ(r.aint, static_cast<std::int64_t>(row.set));  // the address as an integer
    EXPECT_EQ(r.fint, row.low);                              // low 32 bits
    EXPECT_EQ(r.truncated, row.truncates);
  }
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, kAddr), kOk);
  EXPECT_EQ(deref<int>(read_all(e, kComm, kA, k).c), 3);  // the C read gives back &some_int
}

TEST(Interop, SetFromFortranAintReadInEveryBinding) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.set);
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranAint, row.set), kOk);
    Reads r = read_all(e, kComm, kA, k);
    ASSERT_NE(r.c, 0u);
    EXPECT_EQ(deref<std::int64_t>(r.c), static_cast<std::int64_t>(row.set));  // -> stored int64
    EXPECT_EQ(r.aint, static_cast<std::int64_t>(row.set));                     // the value
    EXPECT_EQ(r.fint, row.low);                                                // low 32 bits
    EXPECT_EQ(r.truncated, row.truncates);
  }
}

TEST(Interop, SetFromFortranIntReadInEveryBinding) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  for (const Row& row : rows()) {  // MPI_ATTR_PUT sets only the low 32 bits, sign-extended
    SCOPED_TRACE(row.set);
    const std::int64_t extended = row.low;
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranInt, row.set), kOk);
    EXPECT_EQ(e.attributes(kComm, kA)[0].value, static_cast<std::uint64_t>(extended));
    Reads r = read_all(e, kComm, kA, k);
    ASSERT_NE(r.c, 0u);
    EXPECT_EQ(deref<std::int32_t>(r.c), row.low);  // pointer to the stored int32
    EXPECT_EQ(r.aint, extended);                   // the value, sign-extended
    EXPECT_EQ(r.fint, row.low);                    // the value
    EXPECT_FALSE(r.truncated);
  }
}

TEST(Interop, CReadPointerStaysValidAcrossUnrelatedSets) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec()), k2 = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranAint, 1ull << 40), kOk);
  ASSERT_EQ(e.set_attr(kComm, kA, k2, Binding::FortranInt, 7), kOk);
  const std::uint64_t p = get_c(e, kComm, kA, k), q = get_c(e, kComm, kA, k2);
  for (Handle h = 1; h <= 500; ++h) {  // many Fortran cells elsewhere, half of them freed
    const Handle obj = 0x100000 + h;
    create(e, kComm, {obj});
    ASSERT_EQ(e.set_attr(kComm, obj, k, Binding::FortranAint, h), kOk);
    ASSERT_EQ(e.set_attr(kComm, obj, k2, Binding::FortranInt, h), kOk);
    ASSERT_EQ(h % 2 ? e.free_object(kComm, obj) : kOk, kOk);
  }
  EXPECT_EQ(deref<std::int64_t>(p), std::int64_t{1} << 40);
  EXPECT_EQ(deref<std::int32_t>(q), 7);
}

TEST(Interop, WorkedExamplesOfTheStandard) {
  Engine e;
  create(e, kComm, {kWorld}, kWorldFlags);
  // Example 1: set in C a pointer to int, a pointer to struct, and the integer 17.
  int set_val = 3;
  struct Foo { double a, b; } set_struct{1, 2};
  KeyvalId k1 = make_key(e, plain_spec()), k2 = make_key(e, plain_spec()), k3 = make_key(e, plain_spec());
  set_all(e, kComm, kWorld, {{k1, W(&set_val)}, {k2, W(&set_struct)}, {k3, 17}});
  Reads r1 = read_all(e, kComm, kWorld, k1), r2 = read_all(e, kComm, kWorld, k2),
        r3 = read_all(e, kComm, kWorld, k3);
  EXPECT_EQ(r1.c, W(&set_val));  // B: C reads
  EXPECT_EQ(deref<int>(r1.c), 3);
  EXPECT_EQ(r2.c, W(&set_struct));
  EXPECT_EQ(r3.c, 17u);
  EXPECT_EQ(r1.fint, static_cast<std::int32_t>(W(&set_val)));  // C: MPI_ATTR_GET, possibly truncated
  EXPECT_EQ(r2.fint, static_cast<std::int32_t>(W(&set_struct)));
  EXPECT_EQ(r3.fint, 17);
  EXPECT_EQ(r1.aint, static_cast<std::int64_t>(W(&set_val)));  // D: MPI_COMM_GET_ATTR
  EXPECT_EQ(r2.aint, static_cast<std::int64_t>(W(&set_struct)));
  EXPECT_EQ(r3.aint, 17);
  // Example 2: MPI_ATTR_PUT(VAL = 7).
  KeyvalId k = make_key(e, plain_spec());
  ASSERT_EQ(e.set_attr(kComm, kWorld, k, Binding::FortranInt, 7), kOk);
  Reads r = read_all(e, kComm, kWorld, k);
  EXPECT_EQ(deref<int>(r.c), 7);
  EXPECT_EQ(r.fint, 7);
  EXPECT_EQ(r.aint, 7);
  // Example 3: MPI_COMM_SET_ATTR(42) and (2**40).
  KeyvalId ka = make_key(e, plain_spec()), kb = make_key(e, plain_spec());
  ASSERT_EQ(e.set_attr(kComm, kWorld, ka, Binding::FortranAint, 42), kOk);
  ASSERT_EQ(e.set_attr(kComm, kWorld, kb, Binding::FortranAint, 1ull << 40), kOk);
  Reads ra = read_all(e, kComm, kWorld, ka), rb = read_all(e, kComm, kWorld, kb);
  EXPECT_EQ(deref<std::int64_t>(ra.c), 42);
  EXPECT_EQ(deref<std::int64_t>(rb.c), std::int64_t{1} << 40);
  EXPECT_EQ(ra.fint, 42);
  EXPECT_FALSE(ra.truncated);
  EXPECT_EQ(rb.fint, 0);  // "or 0 if truncation needed"
  EXPECT_TRUE(rb.truncated);
  EXPECT_EQ(ra.aint, 42);
  EXPECT_EQ(rb.aint, std::int64_t{1} << 40);
  // Predefined: MPI_TAG_UB is integer valued (as if by MPI_ATTR_PUT), MPI_WIN_BASE address valued.
  ASSERT_EQ(e.register_predefined_keyval(kComm, 0, "MPI_TAG_UB"), kOk);
  ASSERT_EQ(e.install_predefined(kComm, kWorld, 0, Binding::FortranInt, 8388607), kOk);
  Reads tag = read_all(e, kComm, kWorld, 0);
  EXPECT_EQ(deref<int>(tag.c), 8388607);
  EXPECT_EQ(tag.aint, 8388607);
  ASSERT_EQ(e.register_predefined_keyval(kWin, 100, "MPI_WIN_BASE"), kOk);
  create(e, kWin, {kA});
  static char window[64];
  ASSERT_EQ(e.install_predefined(kWin, kA, 100, Binding::C, W(window)), kOk);
  Reads base = read_all(e, kWin, kA, 100);
  EXPECT_EQ(base.c, W(window));
  EXPECT_EQ(base.aint, static_cast<std::int64_t>(W(window)));
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
EngineConfig invoked_by(CallbackInvoker* inv, Observer* obs = nullptr) {
  EngineConfig cfg;
  cfg.invoker = inv;
  cfg.observer = obs;
  return cfg;
}

TEST(Interop, CallbacksReceiveTheValueInTheirOwnLanguage) {
  RecordingInvoker inv;
  inv.flag = 0;
  Engine e(invoked_by(&inv));
  create(e, kComm, {kA});
  const std::uint64_t set[] = {0x123456789Aull, kMinus5, 0x80000000};  // as C, FortranAint, FortranInt
  for (Binding lang : {Binding::C, Binding::FortranAint, Binding::FortranInt}) {
    KeyvalSpec s = user_spec(nullptr);
    s.lang = lang;
    s.extra_state = 0xE57A7E;
    KeyvalId k = make_key(e, s);
    for (int from = 0; from < 3; ++from) {
      const Binding repr = static_cast<Binding>(from);
      SCOPED_TRACE(std::string(to_string(lang)) + " callback, set as " + to_string(repr));
      ASSERT_EQ(e.set_attr(kComm, kA, k, repr, set[from]), kOk);
      const std::uint64_t cptr = get_c(e, kComm, kA, k);  // valid until the delete below
      ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
      ASSERT_EQ(inv.copies.size(), 1u);
      const CopyCall cc = inv.copies[0];
      EXPECT_EQ(std::make_tuple(cc.kind, cc.old_object, cc.keyval, cc.lang, cc.fn, cc.extra_state),
                std::make_tuple(kComm, kA, k, lang, copy_fn(), std::uint64_t{0xE57A7E}));
      const std::uint64_t v = cc.value_in;
      if (lang == Binding::C) {  // C-set: the address; Fortran-set: a pointer to the integer
        EXPECT_EQ(v, repr == Binding::C ? set[0] : cptr);
        if (repr == Binding::FortranAint) {
          EXPECT_EQ(deref<std::int64_t>(v), -5);
        } else if (repr == Binding::FortranInt) {
          EXPECT_EQ(deref<std::int32_t>(v), INT32_MIN);
        }
      } else if (lang == Binding::FortranAint) {  // the integer (sign-extended from INTEGER)
        const std::uint64_t want[] = {set[0], kMinus5, 0xFFFFFFFF80000000ull};
        EXPECT_EQ(v, want[from]);
      } else {  // the low 32 bits
        const std::int32_t want[] = {0x3456789A, -5, INT32_MIN};
        EXPECT_EQ(static_cast<std::int32_t>(v), want[from]);
      }
      ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
      ASSERT_EQ(inv.dels.size(), 1u);
      const DeleteCall dc = inv.dels[0];  // delete callbacks get the same conversion
      EXPECT_EQ(std::make_tuple(dc.kind, dc.object, dc.keyval, dc.lang, dc.fn, dc.extra_state),
                std::make_tuple(kComm, kA, k, lang, del_fn(), std::uint64_t{0xE57A7E}));
      EXPECT_EQ(dc.cause, CallbackCause::Delete);
      EXPECT_EQ(dc.value, v);
      ASSERT_EQ(e.free_object(kComm, kB), kOk);
      inv.copies.clear();
      inv.dels.clear();
    }
  }
}

TEST(Interop, CopyCallbackValueOutIsStoredInTheCallbacksLanguage) {
  RecordingInvoker inv;
  Engine e(invoked_by(&inv));
  create(e, kComm, {kA});
  struct Case {
    Binding lang;
    std::uint64_t out, stored;
  } cases[] = {{Binding::C, kAddr, kAddr},
               {Binding::FortranAint, 1ull << 40, 1ull << 40},
               {Binding::FortranInt, 0xFFFFFFFF, ~std::uint64_t{0}}};
  Handle dup = 0x9000;
  for (const Case& c : cases) {
    SCOPED_TRACE(to_string(c.lang));
    KeyvalSpec s = user_spec(nullptr);
    s.lang = c.lang;
    KeyvalId k = make_key(e, s);
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
    inv.out = c.out;
    ASSERT_EQ(e.dup_object(kComm, kA, ++dup), kOk);
    std::vector<AttributeInfo> a = e.attributes(kComm, dup);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].keyval, k);
    EXPECT_EQ(a[0].repr, c.lang);
    EXPECT_EQ(a[0].value, c.stored);
    const std::uint64_t cread = get_c(e, kComm, dup, k);  // what a C read of the copy sees
    const std::int64_t pointee = c.lang == Binding::C             ? deref<int>(cread)
                                 : c.lang == Binding::FortranAint ? deref<std::int64_t>(cread)
                                                                  : deref<std::int32_t>(cread);
    EXPECT_EQ(pointee, c.lang == Binding::C ? 3 : static_cast<std::int64_t>(c.stored));
    ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
  }
}

// ---- Callbacks and re-entrance -------------------------------------------------------------

TEST(Reentrance, PetscInnerOuterCommsDeleteEachOthersAttribute) {
  for (Handle first : {kA, kB}) {
    SCOPED_TRACE(first);
    Engine e;
    Rec rin, rout;  // kout lives on the outer comm kA (value: kB), kin on the inner kB (value: kA)
    KeyvalId kin = make_key(e, user_spec(&rin)), kout = make_key(e, user_spec(&rout));
    std::vector<Result> nested;
    rout.on_del = [&](Handle, KeyvalId, std::uint64_t inner) {
      nested.push_back(e.delete_attr(kComm, inner, kin));
      return 0;
    };
    rin.on_del = [&](Handle, KeyvalId, std::uint64_t outer) {
      nested.push_back(e.delete_attr(kComm, outer, kout));
      return 0;
    };
    create(e, kComm, {kA, kB});
    set_all(e, kComm, kA, {{kout, kB}});
    set_all(e, kComm, kB, {{kin, kA}});
    ASSERT_EQ(e.free_object(kComm, first), kOk);
    // The first callback deleted the other attribute (Ok, recorded last); that one's callback,
    // deleting back on the object being freed, was refused (recorded first).
    EXPECT_EQ(nested, (std::vector<Result>{R(Status::Reentrant), kOk}));
    EXPECT_EQ(rin.deletes, 1);
    EXPECT_EQ(rout.deletes, 1);
    EXPECT_TRUE(e.attributes().empty());
    EXPECT_FALSE(object_registered(e, kComm, first));
    ASSERT_EQ(e.free_object(kComm, first == kA ? kB : kA), kOk);
    EXPECT_EQ(rin.deletes + rout.deletes, 2);
  }
}

TEST(Reentrance, CallbackModifyingItsOwnObjectIsRefused) {
  Engine e;
  Rec r;
  KeyvalId k1 = make_key(e, user_spec(&r)), k2 = make_key(e, plain_spec()), k3 = make_key(e, plain_spec());
  std::vector<Result> got;
  std::uint64_t read = 0;
  r.on_del = [&](Handle obj, KeyvalId, std::uint64_t) {
    got.push_back(e.set_attr(kComm, obj, k2, Binding::C, 2));
    got.push_back(e.set_attr(kComm, obj, k3, Binding::C, 4));  // replace
    got.push_back(e.delete_attr(kComm, obj, k3));
    got.push_back(e.free_object(kComm, obj));
    read = get_c(e, kComm, obj, k3);  // reads are fine
    return 0;
  };
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k3, 3}, {k1, 1}});
  const std::vector<Result> refused(4, R(Status::Reentrant));
  ASSERT_EQ(e.delete_attr(kComm, kA, k1), kOk);  // during delete_attr (cause Delete) ...
  EXPECT_EQ(got, refused);
  EXPECT_EQ(read, 3u);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k3}));
  EXPECT_EQ(get_c(e, kComm, kA, k3), 3u);
  set_all(e, kComm, kA, {{k1, 1}});
  got.clear();
  ASSERT_EQ(e.set_attr(kComm, kA, k1, Binding::C, 5), kOk);  // ... during a replacing set ...
  EXPECT_EQ(got, refused);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k3, k1}));
  got.clear();
  ASSERT_EQ(e.free_object(kComm, kA), kOk);  // ... and during free_object; k3 then goes normally
  EXPECT_EQ(got, refused);
  EXPECT_FALSE(object_registered(e, kComm, kA));
  EXPECT_TRUE(e.attributes().empty());
}

TEST(Reentrance, CopyCallbackSettingOnOldObjectIsRefused) {
  Engine e;
  Rec r;
  KeyvalId k = make_key(e, user_spec(&r)), other = make_key(e, plain_spec());
  std::vector<Result> got;
  r.on_copy = [&](Handle old, KeyvalId, std::uint64_t in, std::uint64_t* out, int* flag) {
    got.push_back(e.set_attr(kComm, old, other, Binding::C, 9));
    got.push_back(e.delete_attr(kComm, old, k));
    got.push_back(e.free_object(kComm, old));
    *out = in;
    *flag = 1;
    return 0;
  };
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k, 1}});
  ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
  EXPECT_EQ(got, std::vector<Result>(3, R(Status::Reentrant)));
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k}));
  EXPECT_EQ(keys_of(e, kComm, kB), (Keys{k}));
  EXPECT_EQ(r.deletes, 0);
}

TEST(Reentrance, CopyCallbackGettingOnOldObjectWorks) {
  Engine e;
  Rec r;
  KeyvalId k = make_key(e, user_spec(&r)), other = make_key(e, plain_spec());
  r.on_copy = [&](Handle old, KeyvalId, std::uint64_t, std::uint64_t* out, int* flag) {
    *out = get_c(e, kComm, old, other) + 1;  // copy "other + 1"
    *flag = 1;
    return 0;
  };
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{other, 41}, {k, 1}});
  ASSERT_EQ(e.dup_object(kComm, kA, kB), kOk);
  EXPECT_EQ(get_c(e, kComm, kB, k), 42u);
}

TEST(Reentrance, ThrowingInvokerIsCallbackThrewAndStateStaysConsistent) {
  RecordingInvoker inv;
  EventLog obs;
  Engine e(invoked_by(&inv, &obs));
  KeyvalSpec sd = user_spec(nullptr);
  sd.copy = CopyCallback{CopyAction::Dup, nullptr, false};
  KeyvalId kd = make_key(e, sd), ku = make_key(e, user_spec(nullptr));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{kd, 1}, {ku, 2}});
  inv.throw_del = true;
  EXPECT_EQ(e.delete_attr(kComm, kA, ku), R(Status::CallbackThrew));
  EXPECT_EQ(e.set_attr(kComm, kA, ku, Binding::C, 3), R(Status::CallbackThrew));
  EXPECT_EQ(e.free_object(kComm, kA), R(Status::CallbackThrew));
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{kd, ku}));
  EXPECT_EQ(get_c(e, kComm, kA, ku), 2u);
  ASSERT_EQ(obs.events.size(), 3u);
  expect_event(obs.events[0], CallbackCause::Delete, kComm, kA, ku, 0, -1, /*threw=*/true);
  expect_event(obs.events[1], CallbackCause::Set, kComm, kA, ku, 0, -1, /*threw=*/true);
  expect_event(obs.events[2], CallbackCause::Free, kComm, kA, ku, 0, -1, /*threw=*/true);
  // A throwing copy callback fails the dup; the copy already made (kd) is rolled back.
  inv.throw_del = false;
  inv.throw_copy = true;
  inv.dels.clear();
  EXPECT_EQ(e.dup_object(kComm, kA, kB), R(Status::CallbackThrew));
  ASSERT_EQ(inv.dels.size(), 1u);
  EXPECT_EQ(inv.dels[0].object, kB);
  EXPECT_EQ(inv.dels[0].keyval, kd);
  EXPECT_EQ(inv.dels[0].cause, CallbackCause::DupRollback);
  EXPECT_FALSE(object_registered(e, kComm, kB));
  inv.throw_copy = false;
  EXPECT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_TRUE(e.attributes().empty());
}

TEST(Reentrance, ObserverEventsDescribeEachCallback) {
  Watched w;
  Engine& e = w.e;
  Rec r;
  r.del_rc = 3;
  r.copy_flag = 0;
  r.copy_rc = 0;
  KeyvalId k = make_key(e, user_spec(&r, kWin));
  create(e, kWin, {kA});
  ASSERT_EQ(e.set_attr(kWin, kA, k, Binding::C, 1), kOk);
  ASSERT_EQ(e.dup_object(kWin, kA, kB), kOk);
  ASSERT_EQ(e.delete_attr(kWin, kA, k), R(Status::CallbackFailed, 3));
  ASSERT_EQ(w.obs.events.size(), 2u);
  const CallbackEvent& c = w.obs.events[0];
  EXPECT_EQ(std::make_tuple(c.which, c.cause, c.kind, c.object, c.keyval, c.rc, c.flag, c.threw),
            std::make_tuple(CallbackEvent::Which::Copy, CallbackCause::Dup, kWin, kA, k, 0, 0, false));
  const CallbackEvent& d = w.obs.events[1];
  EXPECT_EQ(std::make_tuple(d.which, d.cause, d.kind, d.object, d.keyval, d.rc, d.threw),
            std::make_tuple(CallbackEvent::Which::Delete, CallbackCause::Delete, kWin, kA, k, 3, false));
}

// ---- Errors, strings, size -----------------------------------------------------------------

TEST(Errors, ErrorClassOfEveryStatus) {
  using S = Status;
  using E = ErrorClass;
  const ErrorClass object_class[] = {E::Comm, E::Type, E::Win};
  for (int i = 0; i < kObjectKinds; ++i) {
    const ObjectKind kind = static_cast<ObjectKind>(i);
    SCOPED_TRACE(to_string(kind));
    EXPECT_EQ(error_class(S::Ok, kind), E::Success);
    for (S s : {S::KeyvalInvalid, S::KeyvalUnknown, S::KeyvalFreed, S::KeyvalDoubleFree, S::KeyvalKindMismatch,
                S::KeyvalPredefined})
      EXPECT_EQ(error_class(s, kind), E::Keyval) << to_string(s);
    for (S s : {S::ObjectNull, S::ObjectUnknown, S::ObjectExists, S::ObjectPredefined})
      EXPECT_EQ(error_class(s, kind), object_class[i]) << to_string(s);
    EXPECT_EQ(error_class(S::NullArgument, kind), E::Arg);
    EXPECT_EQ(error_class(S::CallbackFailed, kind), E::Callback);
    EXPECT_EQ(error_class(S::CallbackThrew, kind), E::Callback);
    for (S s : {S::Reentrant, S::Finalized, S::CapacityExhausted})
      EXPECT_EQ(error_class(s, kind), E::Other) << to_string(s);
    EXPECT_EQ(error_class(S::AttrAbsent, kind), E::Success);
  }
}

TEST(Errors, ToStringIsNonNullAndDistinct) {
  std::set<std::string> seen;
  const int n = static_cast<int>(Status::CapacityExhausted) + 1;
  for (int i = 0; i < n; ++i) {
    const char* s = to_string(static_cast<Status>(i));
    ASSERT_NE(s, nullptr) << i;
    EXPECT_GT(std::strlen(s), 0u) << i;
    EXPECT_TRUE(seen.insert(s).second) << "duplicate: " << s;
  }
  EXPECT_EQ(seen.size(), 18u);
  for (int i = 0; i < 6; ++i) EXPECT_NE(to_string(static_cast<CallbackCause>(i)), nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_NE(to_string(static_cast<Binding>(i)), nullptr);
  for (int i = 0; i < 8; ++i) EXPECT_NE(to_string(static_cast<ErrorClass>(i)), nullptr);
}

TEST(Size, AttributeBytesPerAttributeAtMost64) {
  Engine e;
  create(e, kComm, {kA});
  const std::size_t empty = e.attribute_bytes();
  for (int i = 0; i < 64; ++i) set_all(e, kComm, kA, {{make_key(e, plain_spec()), i + 1u}});
  ASSERT_EQ(e.attributes(kComm, kA).size(), 64u);
  const std::size_t bytes = e.attribute_bytes();
  EXPECT_GT(bytes, empty);  // it does count the attributes
  EXPECT_LE(bytes / 64, 64u) << bytes << " bytes for 64 attributes";
}

}  // namespace

// The versions a caller memoises get answers by (the runtime's query cache): layout_version()
// moves only when a query's validity can change, version() whenever an answer can.
TEST(Versions, LayoutMovesWithKeyvalsAndObjectsNotWithAttributes) {
  Engine e;
  const std::uint64_t l0 = e.layout_version();
  EXPECT_NE(l0, 0u);
  KeyvalId k = make_key(e, plain_spec());
  const std::uint64_t l1 = e.layout_version();
  EXPECT_GT(l1, l0);
  create(e, kComm, {kA});
  const std::uint64_t l2 = e.layout_version();
  EXPECT_GT(l2, l1);
  const std::uint64_t v0 = e.version();
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 10), kOk);
  const std::uint64_t v1 = e.version();
  EXPECT_GT(v1, v0);
  EXPECT_EQ(v1 % 2, 0u);
  EXPECT_EQ(get_c(e, kComm, kA, k), 10u);
  EXPECT_EQ(e.version(), v1);  // reading changes nothing
  ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
  EXPECT_GT(e.version(), v1);
  EXPECT_EQ(e.layout_version(), l2);  // set and delete leave validity alone
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  const std::uint64_t l3 = e.layout_version();
  EXPECT_GT(l3, l2);
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_GT(e.layout_version(), l3);
  const std::uint64_t l4 = e.layout_version();
  e.finalize();
  EXPECT_GT(e.layout_version(), l4);
}

// Rollback delete callbacks run for the new object: the old one, whose copying is over, may be
// modified from inside them (found by the model test: the old object stayed held as re-entrant).
TEST(Reentrance, DupRollbackCallbackMayModifyTheOldObject) {
  Engine e;
  Rec first, failing, other;
  KeyvalId ka = make_key(e, user_spec(&first));
  KeyvalId kb = make_key(e, user_spec(&failing));
  KeyvalId kc = make_key(e, plain_spec());
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{ka, 1}, {kb, 2}, {kc, 3}});
  failing.copy_rc = 9;  // the second copy fails: the first one's copy is rolled back
  Result nested{Status::Ok, -1};
  first.on_del = [&](Handle object, KeyvalId, std::uint64_t) {
    if (object == kB) nested = e.delete_attr(kComm, kA, kc);
    return 0;
  };
  EXPECT_EQ(e.dup_object(kComm, kA, kB), R(Status::CallbackFailed, 9));
  EXPECT_EQ(nested, kOk);
  EXPECT_FALSE(has_attr(e, kComm, kA, kc));
  EXPECT_TRUE(has_attr(e, kComm, kA, ka));
}

// ---- set_attr_ran: mirroring a set whose delete callback ran elsewhere ----------------------

SetCursor cursor_for(const Engine& e, ObjectKind kind, Handle h, KeyvalId k, bool* user_delete = nullptr) {
  SetCursor c;
  EXPECT_TRUE(e.find_set_cursor(kind, h, k, e.layout_version(), &c, user_delete)) << k;
  return c;
}

TEST(SetAttrRan, ReplacesAsSetAttrWouldWithoutCallingAnything) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {k2, 2}});
  bool user_delete = false;
  const SetCursor c = cursor_for(e, kComm, kA, k1, &user_delete);
  EXPECT_TRUE(user_delete);
  const std::uint64_t before = e.version();
  const RanDelete ran{kA, k1, 1, 0};
  std::uint64_t after = 0;
  ASSERT_TRUE(e.set_attr_ran(c, Binding::C, 3, 7, &ran, &after));
  EXPECT_TRUE(log.empty());  // nothing called
  EXPECT_TRUE(w.obs.events.empty());
  EXPECT_EQ(get_c(e, kComm, kA, k1), 3u);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k2, k1}));  // the newest, as set_attr makes it
  EXPECT_NE(after, before);
  EXPECT_EQ(after, e.version());
  EXPECT_EQ(e.attributes(kComm, kA)[1].set_at, 7u);
  EXPECT_EQ(info_of(e, k1).attributes, 1u);
}

TEST(SetAttrRan, InsertsWhenNothingWasSet) {
  Engine e;
  Rec r(nullptr, "k");
  KeyvalId k = make_key(e, user_spec(&r));
  KeyvalId plain = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_TRUE(e.set_attr_ran(cursor_for(e, kComm, kA, k), Binding::C, 5, 0, nullptr));
  EXPECT_EQ(get_c(e, kComm, kA, k), 5u);
  EXPECT_EQ(info_of(e, k).attributes, 1u);
  // A keyval without a delete callback replaces without one too.
  bool user_delete = true;
  const SetCursor c = cursor_for(e, kComm, kA, plain, &user_delete);
  EXPECT_FALSE(user_delete);
  ASSERT_TRUE(e.set_attr_ran(c, Binding::C, 6, 0, nullptr));
  ASSERT_TRUE(e.set_attr_ran(c, Binding::FortranAint, 7, 0, nullptr));
  EXPECT_EQ(get_c(e, kComm, kA, plain) != 7u, true);  // a C read of a Fortran value is its address
  std::int64_t v = 0;
  int flag = 0;
  ASSERT_EQ(e.get_attr(kComm, kA, plain, Binding::FortranAint, &v, &flag), kOk);
  EXPECT_EQ(v, 7);
  EXPECT_EQ(r.deletes, 0);
}

// What set_attr_ran and delete_attr_ran both refuse, changing nothing: anything but exactly the
// delete callback call the standard requires. apply(e, cursor, ran) makes the call.
template <typename Apply>
void expect_only_the_required_call(Apply apply) {
  Engine e;
  Rec r(nullptr, "k");
  KeyvalId k = make_key(e, user_spec(&r));
  KeyvalId plain = make_key(e, plain_spec());
  create(e, kComm, {kA, kB});
  set_all(e, kComm, kA, {{k, 1}, {plain, 2}});
  const SetCursor c = cursor_for(e, kComm, kA, k);
  const SetCursor cp = cursor_for(e, kComm, kA, plain);
  const SetCursor fresh = cursor_for(e, kComm, kB, k);
  const std::uint64_t version = e.version();
  const RanDelete ok{kA, k, 1, 0};
  const RanDelete failed{kA, k, 1, 5}, other_value{kA, k, 9, 0}, other_object{kB, k, 1, 0}, other_key{kA, plain, 1, 0};
  EXPECT_FALSE(apply(e, c, nullptr));  // the delete callback must run
  EXPECT_FALSE(apply(e, c, &failed));
  EXPECT_FALSE(apply(e, c, &other_value));
  EXPECT_FALSE(apply(e, c, &other_object));
  EXPECT_FALSE(apply(e, c, &other_key));
  EXPECT_FALSE(apply(e, cp, &ok));     // nothing to run
  EXPECT_FALSE(apply(e, fresh, &ok));  // nothing set there
  EXPECT_FALSE(apply(e, SetCursor{}, nullptr));
  EXPECT_EQ(e.version(), version);
  EXPECT_EQ(get_c(e, kComm, kA, k), 1u);
  EXPECT_EQ(get_c(e, kComm, kA, plain), 2u);
  EXPECT_FALSE(has_attr(e, kComm, kB, k));
  EXPECT_TRUE(apply(e, c, &ok));
}

TEST(SetAttrRan, RefusesAnythingButTheCallTheStandardRequiresAndChangesNothing) {
  expect_only_the_required_call([](Engine& e, const SetCursor& c, const RanDelete* ran) {
    return e.set_attr_ran(c, Binding::C, 3, 0, ran);
  });
}

TEST(SetAttrRan, AFortranSetValueIsNotComparedWithACCallbacksValue) {
  Engine e;
  Rec r(nullptr, "k");
  KeyvalId k = make_key(e, user_spec(&r));
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranAint, 4), kOk);
  const RanDelete ran{kA, k, 4, 0};  // whatever the holder passed: only it knows its storage
  EXPECT_FALSE(e.set_attr_ran(cursor_for(e, kComm, kA, k), Binding::C, 3, 0, &ran));
  EXPECT_EQ(e.set_attr(kComm, kA, k, Binding::C, 3), kOk);  // the host's way then
}

TEST(SetAttrRan, ACursorHoldsOnlyWhileTheLayoutDoes) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec()), other = make_key(e, plain_spec());
  create(e, kComm, {kA});
  SetCursor c = cursor_for(e, kComm, kA, k);
  ASSERT_EQ(e.free_keyval(kComm, &other), kOk);  // any layout change
  EXPECT_FALSE(e.set_attr_ran(c, Binding::C, 1, 0, nullptr));
  c = cursor_for(e, kComm, kA, k);
  EXPECT_TRUE(e.set_attr_ran(c, Binding::C, 1, 0, nullptr));
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_FALSE(e.set_attr_ran(c, Binding::C, 2, 0, nullptr));
  SetCursor none;
  EXPECT_FALSE(e.find_set_cursor(kComm, kA, k, e.layout_version(), &none));  // freed object
}

// ---- set_attr_at / delete_attr_at: emulated sets and deletes through a cursor ------------------

// The replaced value's delete callback runs with the old value, outside the lock (it may change
// other objects, which moves the engine's version: the set still lands on its attribute), and
// its failure vetoes the set.
TEST(SetAttrAt, ReplacingRunsTheOldValuesDeleteCallbackWhichMayChangeOtherObjects) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r(&log, "k");
  KeyvalId k = make_key(e, user_spec(&r)), plain = make_key(e, plain_spec());
  create(e, kComm, {kA, kB});
  set_all(e, kComm, kA, {{plain, 9}, {k, 1}});
  r.on_del = [&](Handle, KeyvalId, std::uint64_t) {
    for (std::uint64_t i = 0; i < 8; ++i) EXPECT_EQ(e.set_attr(kComm, kB, plain, Binding::C, i), kOk);
    EXPECT_EQ(e.set_attr(kComm, kA, plain, Binding::C, 3), R(Status::Reentrant));
    return 0;
  };
  const SetCursor c = cursor_for(e, kComm, kA, k);
  AtOutcome out;
  ASSERT_TRUE(e.set_attr_at(c, Binding::C, 2, 5, &out));
  EXPECT_EQ(out.result, kOk);
  EXPECT_EQ(log, (Log{{'D', "k", kA, k, 1}}));
  ASSERT_EQ(w.obs.events.size(), 1u);
  expect_event(w.obs.events[0], CallbackCause::Set, kComm, kA, k);
  EXPECT_EQ(get_c(e, kComm, kA, k), 2u);
  EXPECT_EQ(get_c(e, kComm, kA, plain), 9u);
  EXPECT_EQ(get_c(e, kComm, kB, plain), 7u);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{plain, k}));
  EXPECT_EQ(e.attributes(kComm, kA)[1].set_at, 5u);
  EXPECT_EQ(out.version, e.version());
  EXPECT_EQ(info_of(e, k).attributes, 1u);
  // A failing callback vetoes the set: the old value stays.
  r.on_del = nullptr;
  r.del_rc = 6;
  ASSERT_TRUE(e.set_attr_at(c, Binding::C, 4, 0, &out));
  EXPECT_EQ(out.result, R(Status::CallbackFailed, 6));
  EXPECT_EQ(get_c(e, kComm, kA, k), 2u);
  EXPECT_EQ(info_of(e, k).attributes, 1u);
}

// A keyval freed by its own delete callback during a replace lives on while its attribute does.
TEST(SetAttrAt, AKeyvalFreedInItsDeleteCallbackLastsUntilItsLastAttributeGoes) {
  Engine e;
  Rec r(nullptr, "k");
  KeyvalId k = make_key(e, user_spec(&r));
  KeyvalId held = k;
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  const SetCursor c = cursor_for(e, kComm, kA, k);
  bool freed = false;
  r.on_del = [&](Handle, KeyvalId, std::uint64_t) {
    if (!freed) {
      EXPECT_EQ(e.free_keyval(kComm, &held), kOk);
    }
    freed = true;
    return 0;
  };
  AtOutcome out;
  ASSERT_TRUE(e.set_attr_at(c, Binding::C, 2, 0, &out));  // (the free moves the layout)
  EXPECT_EQ(out.result, kOk);
  ASSERT_EQ(e.attributes(kComm, kA).size(), 1u);
  EXPECT_EQ(e.attributes(kComm, kA)[0].value, 2u);
  EXPECT_TRUE(info_of(e, k).user_freed);
  EXPECT_FALSE(info_of(e, k).destroyed);
  EXPECT_EQ(info_of(e, k).attributes, 1u);
  EXPECT_EQ(e.free_object(kComm, kA), kOk);  // (a freed keyval's attribute goes with its object)
  EXPECT_TRUE(info_of(e, k).destroyed);
  EXPECT_EQ(r.deletes, 2);
}

TEST(DeleteAttrAt, RunsTheDeleteCallbackThenErasesAndAFailureKeepsTheAttribute) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r(&log, "k");
  KeyvalId k = make_key(e, user_spec(&r)), plain = make_key(e, plain_spec());
  create(e, kComm, {kA, kB});
  set_all(e, kComm, kA, {{k, 1}, {plain, 2}});
  const SetCursor c = cursor_for(e, kComm, kA, k);
  AtOutcome out;
  r.del_rc = 4;
  ASSERT_TRUE(e.delete_attr_at(c, &out));
  EXPECT_EQ(out.result, R(Status::CallbackFailed, 4));
  EXPECT_EQ(get_c(e, kComm, kA, k), 1u);
  r.del_rc = 0;
  r.on_del = [&](Handle, KeyvalId, std::uint64_t) {
    EXPECT_EQ(e.set_attr(kComm, kB, k, Binding::C, 8), kOk);  // another object: allowed
    EXPECT_EQ(e.delete_attr(kComm, kA, plain), R(Status::Reentrant));
    return 0;
  };
  ASSERT_TRUE(e.delete_attr_at(c, &out));
  EXPECT_EQ(out.result, kOk);
  EXPECT_EQ(out.version, e.version());
  EXPECT_FALSE(has_attr(e, kComm, kA, k));
  EXPECT_EQ(get_c(e, kComm, kA, plain), 2u);
  EXPECT_EQ(get_c(e, kComm, kB, k), 8u);
  EXPECT_EQ(info_of(e, k).attributes, 1u);
  EXPECT_EQ(log, (Log{{'D', "k", kA, k, 1}, {'D', "k", kA, k, 1}}));
  ASSERT_EQ(w.obs.events.size(), 2u);
  expect_event(w.obs.events[1], CallbackCause::Delete, kComm, kA, k);
  // Absent now: the cursor's delete says so by not serving.
  EXPECT_FALSE(e.delete_attr_at(c, &out));
}

// ---- delete_attr_ran: mirroring a delete whose callback ran elsewhere --------------------------

TEST(DeleteAttrRan, DeletesAsDeleteAttrWouldWithoutCallingAnything) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r1(&log, "k1");
  KeyvalId k1 = make_key(e, user_spec(&r1)), plain = make_key(e, plain_spec());
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {plain, 2}});
  const std::uint64_t before = e.version();
  const RanDelete ran{kA, k1, 1, 0};
  std::uint64_t after = 0;
  ASSERT_TRUE(e.delete_attr_ran(cursor_for(e, kComm, kA, k1), &ran, &after));
  EXPECT_TRUE(log.empty());  // nothing called
  EXPECT_TRUE(w.obs.events.empty());
  EXPECT_FALSE(has_attr(e, kComm, kA, k1));
  EXPECT_EQ(info_of(e, k1).attributes, 0u);
  EXPECT_NE(after, before);
  EXPECT_EQ(after, e.version());
  // A keyval without a delete callback: nothing ran.
  ASSERT_TRUE(e.delete_attr_ran(cursor_for(e, kComm, kA, plain), nullptr));
  EXPECT_EQ(keys_of(e, kComm, kA), Keys{});
  EXPECT_EQ(r1.deletes, 0);
}

TEST(DeleteAttrRan, RefusesAnythingButTheCallTheStandardRequiresAndChangesNothing) {
  // (An absent attribute is refused too: delete_attr reports it.)
  expect_only_the_required_call([](Engine& e, const SetCursor& c, const RanDelete* ran) {
    return e.delete_attr_ran(c, ran);
  });
}

TEST(DeleteAttrRan, ACursorHoldsOnlyWhileTheLayoutDoes) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec()), other = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  const SetCursor c = cursor_for(e, kComm, kA, k);
  ASSERT_EQ(e.free_keyval(kComm, &other), kOk);  // any layout change
  EXPECT_FALSE(e.delete_attr_ran(c, nullptr));
  EXPECT_TRUE(has_attr(e, kComm, kA, k));
  EXPECT_TRUE(e.delete_attr_ran(cursor_for(e, kComm, kA, k), nullptr));
}

TEST(DeleteAttrRan, TheLastAttributeOfAFreedKeyvalDestroysIt) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  const KeyvalId id = k;
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  const SetCursor c = cursor_for(e, kComm, kA, k);
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  EXPECT_FALSE(e.delete_attr_ran(c, nullptr));  // freeing it moved the layout: the general way
  ASSERT_EQ(e.delete_attr(kComm, kA, id), kOk);
  EXPECT_TRUE(info_of(e, id).destroyed);
}

TEST(SetAttrRan, FindSetCursorRefusesWhatSetAttrRefuses) {
  Engine e;
  constexpr KeyvalId kTagUb = 0, kInvalid = -1;  // (the default EngineConfig's MPI_KEYVAL_INVALID)
  ASSERT_EQ(e.register_predefined_keyval(kComm, kTagUb, "MPI_TAG_UB"), kOk);
  KeyvalId k = make_key(e, plain_spec()), tk = make_key(e, plain_spec(kType)), freed = make_key(e, plain_spec());
  ASSERT_EQ(e.free_keyval(kComm, &freed), kOk);
  create(e, kComm, {kA});
  SetCursor c;
  const std::uint64_t layout = e.layout_version();
  EXPECT_FALSE(e.find_set_cursor(kComm, kA, kTagUb, layout, &c));        // predefined
  EXPECT_FALSE(e.find_set_cursor(kComm, kA, tk, layout, &c));            // another kind's
  EXPECT_FALSE(e.find_set_cursor(kComm, kA, k + 4096, layout, &c));      // never created
  EXPECT_FALSE(e.find_set_cursor(kComm, kB, k, layout, &c));             // unknown object
  EXPECT_FALSE(e.find_set_cursor(kComm, 0, k, layout, &c));              // the null handle
  EXPECT_FALSE(e.find_set_cursor(kComm, kA, kInvalid, layout, &c));
  EXPECT_TRUE(e.find_set_cursor(kComm, kA, k, layout, &c));
  EXPECT_EQ(c.layout, layout);
}

TEST(SetAttrRan, RefusedInsideACallbackForTheObject) {
  Engine e;
  Rec r(nullptr, "k");
  KeyvalId k = make_key(e, user_spec(&r));
  KeyvalId plain = make_key(e, plain_spec());
  create(e, kComm, {kA, kB});
  set_all(e, kComm, kA, {{k, 1}});
  const SetCursor on_a = cursor_for(e, kComm, kA, plain), on_b = cursor_for(e, kComm, kB, plain);
  bool a = true, b = false;
  r.on_del = [&](Handle, KeyvalId, std::uint64_t) {
    a = e.set_attr_ran(on_a, Binding::C, 1, 0, nullptr);
    b = e.set_attr_ran(on_b, Binding::C, 1, 0, nullptr);
    return 0;
  };
  ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
  EXPECT_FALSE(a);  // re-entrant
  EXPECT_TRUE(b);
}

// set_attr_ran and set_attr, fed the same sequence, leave the same state behind.
TEST(SetAttrRan, AgreesWithSetAttrOnRandomSequences) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    Engine ran_engine, plain_engine;
    Rec r(nullptr, "k");
    std::vector<KeyvalId> keys;
    for (int i = 0; i < 6; ++i) {
      const KeyvalSpec spec = i % 2 ? user_spec(&r) : plain_spec();
      const KeyvalId a = make_key(ran_engine, spec), b = make_key(plain_engine, spec);
      ASSERT_EQ(a, b);
      keys.push_back(a);
    }
    create(ran_engine, kComm, {kA, kB});
    create(plain_engine, kComm, {kA, kB});
    for (int step = 0; step < 300; ++step) {
      const Handle h = rng() % 2 ? kA : kB;
      const KeyvalId k = keys[rng() % keys.size()];
      const std::uint64_t value = 1 + rng() % 1000;
      const Binding from = rng() % 4 ? Binding::C : Binding::FortranAint;
      if (rng() % 8 == 0) {
        const Result x = ran_engine.delete_attr(kComm, h, k), y = plain_engine.delete_attr(kComm, h, k);
        ASSERT_EQ(x, y);
        continue;
      }
      // What a library running the callback itself would have run, read from the engine.
      bool user_delete = false;
      const SetCursor c = cursor_for(ran_engine, kComm, h, k, &user_delete);
      std::uint64_t old = 0;
      int flag = 0;
      ASSERT_EQ(ran_engine.get_attr(kComm, h, k, Binding::C, &old, &flag), kOk);
      const RanDelete ran{h, k, old, 0};
      const bool runs = flag && user_delete;
      if (!ran_engine.set_attr_ran(c, from, value, step, runs ? &ran : nullptr)) {
        // (a C callback and a Fortran-set value: the host's general way)
        ASSERT_EQ(ran_engine.set_attr(kComm, h, k, from, value, step), kOk);
      }
      ASSERT_EQ(plain_engine.set_attr(kComm, h, k, from, value, step), kOk);
    }
    for (Handle h : {kA, kB}) {
      const auto x = ran_engine.attributes(kComm, h), y = plain_engine.attributes(kComm, h);
      ASSERT_EQ(x.size(), y.size()) << seed;
      for (std::size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(std::make_tuple(x[i].keyval, x[i].repr, x[i].value, x[i].set_at),
                  std::make_tuple(y[i].keyval, y[i].repr, y[i].value, y[i].set_at))
            << "seed " << seed << " attribute " << i;
      }
    }
    for (KeyvalId k : keys) EXPECT_EQ(info_of(ran_engine, k).attributes, info_of(plain_engine, k).attributes);
  }
}
