// engine_dup_free_test: the engine's own dup and free (Engine::dup_object / free_object) on the
// paths that take shortcuts: the one-pass free that drops keyval references as it checks (and
// must give them back when it finds a callback to run), and the dup that runs copy callbacks
// over the old object's records in place, without snapshotting or pinning their keyvals.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attrcheck/engine.hpp"

namespace {

using namespace attrcheck;

constexpr ObjectKind kComm = ObjectKind::Comm;
constexpr Handle kA = 0x1000, kB = 0x2000;

// The engine a callback acts on, and what it should do (extra_state points at it).
struct Script {
  Engine* e = nullptr;
  KeyvalId free_own_key = 0;  // the copy callback frees this keyval (the one it runs for)
  int fail_on_copy = -1;      // the copy callback of this call (0-based) returns 7
  int copies = 0, deletes = 0;
  std::vector<Result> reentrant;  // what the engine answered the callbacks' calls on kA
};

int scripted_copy(Handle, int key, void* extra, void* in, void* out, int* flag) {
  auto* s = static_cast<Script*>(extra);
  const int n = s->copies++;
  if (s->free_own_key == key) {
    KeyvalId k = key;
    EXPECT_EQ(s->e->free_keyval(kComm, &k).status, Status::Ok);
  }
  s->reentrant.push_back(s->e->delete_attr(kComm, kA, key));
  if (n == s->fail_on_copy) return 7;
  *static_cast<std::uint64_t*>(out) = reinterpret_cast<std::uintptr_t>(in) + 1;
  *flag = 1;
  return 0;
}
int counting_delete(Handle, int, void*, void* extra) {
  ++static_cast<Script*>(extra)->deletes;
  return 0;
}

KeyvalId make_key(Engine& e, Script* s, CopyAction copy, DeleteAction del) {
  KeyvalSpec spec;
  spec.kind = kComm;
  spec.copy = CopyCallback{copy, copy == CopyAction::User ? reinterpret_cast<void*>(&scripted_copy) : nullptr, false};
  spec.del = DeleteCallback{del, del == DeleteAction::User ? reinterpret_cast<void*>(&counting_delete) : nullptr, false};
  spec.extra_state = reinterpret_cast<std::uintptr_t>(s);
  KeyvalId k = -1;
  EXPECT_EQ(e.create_keyval(spec, &k).status, Status::Ok);
  return k;
}

KeyvalInfo info(const Engine& e, KeyvalId k) {
  KeyvalInfo i;
  EXPECT_TRUE(e.keyval_info(k, &i));
  return i;
}

// A free that finds a user delete callback only after dropping the references of attributes
// without one (free_plain's single pass) must give them back: the general way then drops each
// once more, and a keyval the user freed must be destroyed exactly when its last attribute goes.
TEST(EngineFree, PlainPassGivesReferencesBackWhenItFindsACallback) {
  Script s;
  Engine e;
  s.e = &e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  ASSERT_TRUE(e.create_object(kComm, kB).ok());
  std::vector<KeyvalId> plain;
  for (int i = 0; i < 24; ++i) plain.push_back(make_key(e, &s, CopyAction::NullCopy, DeleteAction::NullDelete));
  const KeyvalId user = make_key(e, &s, CopyAction::NullCopy, DeleteAction::User);
  // The user keyval's attribute is set last: wherever the table puts it, most plain ones are
  // checked before it.
  for (const KeyvalId k : plain) {
    ASSERT_TRUE(e.set_attr(kComm, kA, k, Binding::C, 1).ok());
    ASSERT_TRUE(e.set_attr(kComm, kB, k, Binding::C, 2).ok());
  }
  ASSERT_TRUE(e.set_attr(kComm, kA, user, Binding::C, 3).ok());
  for (KeyvalId k : plain) ASSERT_TRUE(e.free_keyval(kComm, &k).ok());

  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  EXPECT_EQ(s.deletes, 1);
  for (const KeyvalId k : plain) {
    const KeyvalInfo i = info(e, k);
    EXPECT_EQ(i.attributes, 1u) << k;  // kB's
    EXPECT_FALSE(i.destroyed) << k;
  }
  ASSERT_TRUE(e.free_object(kComm, kB).ok());  // the plain pass, all the way
  for (const KeyvalId k : plain) {
    const KeyvalInfo i = info(e, k);
    EXPECT_EQ(i.attributes, 0u) << k;
    EXPECT_TRUE(i.destroyed) << k;
  }
}

// An engine with object kA holding `n` attributes of keyvals with user copy and delete callbacks,
// oldest first, valued step, 2 * step, ...
struct UserKeysOnA {
  Script s;
  Engine e;
  std::vector<KeyvalId> keys;
  UserKeysOnA(int n, std::uint64_t step) {
    s.e = &e;
    EXPECT_TRUE(e.create_object(kComm, kA).ok());
    for (int i = 0; i < n; ++i) keys.push_back(make_key(e, &s, CopyAction::User, DeleteAction::User));
    for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_TRUE(e.set_attr(kComm, kA, keys[i], Binding::C, step * (i + 1)).ok());
  }
};

// A copy callback that frees its own keyval mid-dup: the old object's attribute keeps the keyval
// (and its callbacks) alive, the copy holds it too, and it is destroyed with the last attribute.
// The callback's delete of the attribute it is copying is refused (re-entrant), so the records
// the dup reads in place never move.
TEST(EngineDup, CopyCallbackFreeingItsKeyvalKeepsItAliveThroughTheAttributes) {
  UserKeysOnA f(8, 10);
  Script& s = f.s;
  Engine& e = f.e;
  const std::vector<KeyvalId>& keys = f.keys;
  s.free_own_key = keys[3];

  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  EXPECT_EQ(s.copies, 8);
  ASSERT_EQ(s.reentrant.size(), 8u);
  for (const Result& r : s.reentrant) EXPECT_EQ(r.status, Status::Reentrant);
  // (Introspection: a get through the freed keyval is refused, as it must be.)
  const std::vector<AttributeInfo> copies = e.attributes(kComm, kB);
  ASSERT_EQ(copies.size(), keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(copies[i].keyval, keys[i]);  // oldest first, as on kA
    EXPECT_EQ(copies[i].value, 10 * (i + 1) + 1);
  }
  KeyvalInfo freed = info(e, keys[3]);
  EXPECT_TRUE(freed.user_freed);
  EXPECT_FALSE(freed.destroyed);
  EXPECT_EQ(freed.attributes, 2u);
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  EXPECT_EQ(s.deletes, 16);
  freed = info(e, keys[3]);
  EXPECT_TRUE(freed.destroyed);
  EXPECT_EQ(freed.attributes, 0u);
}

// A copy callback that fails mid-dup: the copies made so far are deleted (their delete
// callbacks run), the new object is forgotten, the old one keeps everything, and the counts of
// attributes per keyval are as before the dup.
TEST(EngineDup, FailingCopyCallbackUndoesTheCopiesMade) {
  UserKeysOnA f(6, 1);
  Script& s = f.s;
  Engine& e = f.e;
  const std::vector<KeyvalId>& keys = f.keys;
  const KeyvalId dup = make_key(e, &s, CopyAction::Dup, DeleteAction::NullDelete);
  ASSERT_TRUE(e.set_attr(kComm, kA, dup, Binding::C, 99).ok());
  s.fail_on_copy = 3;

  const Result r = e.dup_object(kComm, kA, kB);
  EXPECT_EQ(r.status, Status::CallbackFailed);
  EXPECT_EQ(r.callback_rc, 7);
  EXPECT_EQ(s.copies, 4);
  EXPECT_EQ(s.deletes, 3);  // the three copies made before the failure
  ObjectInfo oi;
  EXPECT_FALSE(e.object_info(kComm, kB, &oi));
  ASSERT_TRUE(e.object_info(kComm, kA, &oi));
  EXPECT_EQ(oi.attributes, 7u);
  for (const KeyvalId k : keys) EXPECT_EQ(info(e, k).attributes, 1u) << k;
  EXPECT_EQ(info(e, dup).attributes, 1u);
}

}  // namespace
