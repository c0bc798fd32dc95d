// engine_dup_free_test: the engine's own dup and free (Engine::dup_object / free_object) on the
// paths that take shortcuts: the one-pass free that drops keyval references as it checks (and
// must give them back when it finds a callback to run), and the dup that runs copy callbacks
// over the old object's records in place, without snapshotting or pinning their keyvals.
#include <gtest/gtest.h>

#include <algorithm>
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
  std::vector<KeyvalId> deleted;  // the keys of the delete callbacks run, in order
  bool touch_a = true;            // the copy callback tries to delete its attribute of kA
  int fail_on_delete = -1;        // the delete callback of this call (1-based) returns 5
  int probe_at = -1;              // the delete callback of this call (1-based) calls probe
  void (*probe)(Script*) = nullptr;
};

int scripted_copy(Handle, int key, void* extra, void* in, void* out, int* flag) {
  auto* s = static_cast<Script*>(extra);
  const int n = s->copies++;
  if (s->free_own_key == key) {
    KeyvalId k = key;
    EXPECT_EQ(s->e->free_keyval(kComm, &k).status, Status::Ok);
  }
  if (s->touch_a) s->reentrant.push_back(s->e->delete_attr(kComm, kA, key));
  if (n == s->fail_on_copy) return 7;
  *static_cast<std::uint64_t*>(out) = reinterpret_cast<std::uintptr_t>(in) + 1;
  *flag = 1;
  return 0;
}
int counting_delete(Handle, int key, void*, void* extra) {
  auto* s = static_cast<Script*>(extra);
  ++s->deletes;
  s->deleted.push_back(key);
  if (s->deletes == s->probe_at && s->probe) s->probe(s);
  return s->deletes == s->fail_on_delete ? 5 : 0;
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

// A dup with a copy callback to call puts each copy into the same slot of a table of the old
// one's size; attributes not copied leave holes there, which would cut the probe sequences of
// others: the copy's table is then repacked. Every copy must be found by a get, the others not,
// and the copy's set order is the old one's without them.
TEST(EngineDup, CopiesAreFoundWhereSomeAttributesAreNotCopied) {
  Script s;
  s.touch_a = false;
  Engine e;
  s.e = &e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys, copied;
  for (int i = 0; i < 95; ++i) {  // (a table of 128 slots, three quarters full: probe sequences)
    const CopyAction a = i == 0 ? CopyAction::User : (i % 3 == 1 ? CopyAction::NullCopy : CopyAction::Dup);
    keys.push_back(make_key(e, &s, a, DeleteAction::NullDelete));
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, 100 + i).ok());
    if (a != CopyAction::NullCopy) copied.push_back(keys.back());
  }
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::uint64_t v = 0;
    int flag = -1;
    ASSERT_TRUE(e.get_attr(kComm, kB, keys[i], Binding::C, &v, &flag).ok());
    const bool want = i == 0 || i % 3 != 1;
    EXPECT_EQ(flag, want ? 1 : 0) << i;
    if (want) {
      EXPECT_EQ(v, i == 0 ? 101u : 100 + i) << i;  // (the callback adds 1)
    }
  }
  std::vector<KeyvalId> order;
  for (const AttributeInfo& a : e.attributes(kComm, kB)) order.push_back(a.keyval);
  EXPECT_EQ(order, copied);
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
}

std::vector<KeyvalId> keys_in_set_order(const Engine& e, Handle h) {
  std::vector<KeyvalId> out;
  for (const AttributeInfo& a : e.attributes(kComm, h)) out.push_back(a.keyval);
  return out;
}

// The set order an object keeps for its dups and frees (made once, then kept while its records
// stay as they are; a dup hands the copy its list) must follow every change of the records: a
// re-set makes an attribute the newest, a delete removes it, a new set comes last, and a table
// that grows moves every record. Each dup copies in the set order of the moment, each free
// deletes newest first.
constexpr Handle kC = 0x3000, kD = 0x4000;
TEST(EngineDupFree, KeptSetOrderFollowsEveryChange) {
  UserKeysOnA f(8, 10);
  Script& s = f.s;
  Engine& e = f.e;
  s.touch_a = false;  // (B is dup'd too)
  std::vector<KeyvalId> want = f.keys;  // oldest first
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());  // A's list made, B's kept from the dup
  EXPECT_EQ(keys_in_set_order(e, kB), want);
  ASSERT_TRUE(e.dup_object(kComm, kA, kC).ok());  // A's list as kept
  EXPECT_EQ(keys_in_set_order(e, kC), want);

  // B: a re-set, a delete, a new attribute, then more than its table holds (it grows).
  s.deleted.clear();
  ASSERT_TRUE(e.set_attr(kComm, kB, want[2], Binding::C, 5).ok());  // k2's old value deleted
  ASSERT_TRUE(e.delete_attr(kComm, kB, want[5]).ok());
  std::vector<KeyvalId> b = want;
  b.erase(b.begin() + 5);
  b.erase(b.begin() + 2);
  b.push_back(want[2]);
  for (int i = 0; i < 12; ++i) {
    const KeyvalId k = make_key(e, &s, CopyAction::User, DeleteAction::User);
    ASSERT_TRUE(e.set_attr(kComm, kB, k, Binding::C, 1).ok());
    b.push_back(k);
  }
  EXPECT_EQ(keys_in_set_order(e, kB), b);
  ASSERT_TRUE(e.dup_object(kComm, kB, kD).ok());  // B's list made again
  EXPECT_EQ(keys_in_set_order(e, kD), b);
  s.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  EXPECT_EQ(s.deleted, std::vector<KeyvalId>(b.rbegin(), b.rend()));
  s.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kD).ok());  // D's list, kept from its dup
  EXPECT_EQ(s.deleted, std::vector<KeyvalId>(b.rbegin(), b.rend()));

  // A, after its list was kept: a re-set of its oldest attribute.
  ASSERT_TRUE(e.set_attr(kComm, kA, want[0], Binding::C, 7).ok());
  std::rotate(want.begin(), want.begin() + 1, want.end());
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  EXPECT_EQ(keys_in_set_order(e, kB), want);
  s.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  EXPECT_EQ(s.deleted, std::vector<KeyvalId>(want.rbegin(), want.rend()));
  // C, dup'd before that change: A's old order, newest first.
  s.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kC).ok());
  EXPECT_EQ(s.deleted, std::vector<KeyvalId>(f.keys.rbegin(), f.keys.rend()));
}

// A free marks each attribute deleted as its callback returns (a dead record that lookups probe
// past), without moving the others. A callback in the middle of the free finds the attributes
// already deleted absent and the others present, with their values; it lists only those; and a
// dup it makes of the object gets exactly those, each found by its lookup (the dead records are
// holes of the old table: without the dup's test of them some copies sit past an empty slot
// their probe stops at). Every keyval reference is given back once. The older half of the
// attributes is set again first, so the free deletes them first: they sit where the probes of
// the other half pass (set first), which a newest-first free of attributes set once never gives.
struct MidFree {
  static constexpr int kKeys = 40, kHalf = 20;
  static inline std::vector<KeyvalId> keys;
  static inline std::vector<int> present_a, present_b, listed;
  static inline Result dup;
  // The indices of the keys whose attribute object h has; each value must be 10 * (i + 1) + plus.
  static std::vector<int> present(Engine& e, Handle h, std::uint64_t plus) {
    std::vector<int> out;
    for (int i = 0; i < kKeys; ++i) {
      std::uint64_t v = 0;
      int flag = -1;
      EXPECT_TRUE(e.get_attr(kComm, h, keys[i], Binding::C, &v, &flag).ok());
      if (flag) {
        out.push_back(i);
        EXPECT_EQ(v, 10u * (i + 1) + plus) << i;
      }
    }
    return out;
  }
  static void probe(Script* s) {
    Engine& e = *s->e;
    present_a = present(e, kA, 0);
    listed.clear();
    for (const AttributeInfo& a : e.attributes(kComm, kA))
      listed.push_back(static_cast<int>(std::find(keys.begin(), keys.end(), a.keyval) - keys.begin()));
    dup = e.dup_object(kComm, kA, kB);
    present_b = present(e, kB, 1);  // (the copy callback adds 1)
  }
};
TEST(EngineFree, ACallbackSeesTheAttributesNotYetDeleted) {
  UserKeysOnA f(MidFree::kKeys, 10);
  Script& s = f.s;
  Engine& e = f.e;
  s.touch_a = false;
  for (int i = 0; i < MidFree::kHalf; ++i) ASSERT_TRUE(e.set_attr(kComm, kA, f.keys[i], Binding::C, 10u * (i + 1)).ok());
  s.deletes = 0;  // (each set ran the old value's delete callback)
  MidFree::keys = f.keys;
  s.probe_at = MidFree::kHalf + 1;  // keys 19 .. 0 deleted, 39's callback running
  s.probe = &MidFree::probe;
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  std::vector<int> want;
  for (int i = MidFree::kHalf; i < MidFree::kKeys; ++i) want.push_back(i);
  EXPECT_EQ(MidFree::present_a, want);
  EXPECT_EQ(MidFree::listed, want);  // (in set order)
  EXPECT_TRUE(MidFree::dup.ok());
  EXPECT_EQ(MidFree::present_b, want);
  for (int i = 0; i < MidFree::kKeys; ++i) EXPECT_EQ(info(e, f.keys[i]).attributes, i >= MidFree::kHalf ? 1u : 0u) << i;
  s.deleted.clear();
  s.probe = nullptr;
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  EXPECT_EQ(s.deleted, std::vector<KeyvalId>(f.keys.rbegin(), f.keys.rbegin() + MidFree::kHalf));
  for (const KeyvalId k : f.keys) EXPECT_EQ(info(e, k).attributes, 0u) << k;
}

// A free stopped by a failing delete callback keeps the attributes not deleted yet, found where
// lookups look (the dead records gone), listed and freed later in their set order; the table the
// free held goes back clean (objects made after it, from the pool, hold what they are given).
TEST(EngineFree, AStoppedFreeKeepsTheRestWhereLookupsFindThem) {
  UserKeysOnA f(40, 10);
  Script& s = f.s;
  Engine& e = f.e;
  s.touch_a = false;
  s.fail_on_delete = 25;  // keys 39 .. 16 deleted, 15's callback fails
  EXPECT_EQ(e.free_object(kComm, kA), (Result{Status::CallbackFailed, 5}));
  const std::vector<KeyvalId> rest(f.keys.begin(), f.keys.begin() + 16);
  EXPECT_EQ(keys_in_set_order(e, kA), rest);
  for (int i = 0; i < 40; ++i) {
    std::uint64_t v = 0;
    int flag = -1;
    ASSERT_TRUE(e.get_attr(kComm, kA, f.keys[i], Binding::C, &v, &flag).ok());
    EXPECT_EQ(flag, i < 16 ? 1 : 0) << i;
    if (i < 16) {
      EXPECT_EQ(v, 10u * (i + 1)) << i;
    }
    EXPECT_EQ(info(e, f.keys[i]).attributes, i < 16 ? 1u : 0u) << i;
  }
  s.fail_on_delete = -1;
  s.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  EXPECT_EQ(s.deleted, std::vector<KeyvalId>(rest.rbegin(), rest.rend()));
  // Tables from the pool: each new object holds exactly what is set on it.
  for (Handle h : {kB, kC, kD}) {
    ASSERT_TRUE(e.create_object(kComm, h).ok());
    for (const KeyvalId k : f.keys) ASSERT_TRUE(e.set_attr(kComm, h, k, Binding::C, 3).ok());
    EXPECT_EQ(keys_in_set_order(e, h), f.keys);
    s.deleted.clear();
    ASSERT_TRUE(e.free_object(kComm, h).ok());
    EXPECT_EQ(s.deleted.size(), f.keys.size());
  }
  for (const KeyvalId k : f.keys) EXPECT_EQ(info(e, k).attributes, 0u) << k;
}

// Fortran-set values hold a cell each (what a C read points at): a free gives every one back as
// it marks their attributes deleted (kill_attr_with_cell).
TEST(EngineFree, FortranValuesGiveTheirCellsBack) {
  Script s;
  Engine e;
  s.e = &e;
  s.touch_a = false;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 8; ++i) keys.push_back(make_key(e, &s, CopyAction::User, DeleteAction::User));
  for (std::size_t i = 0; i < keys.size(); ++i)
    ASSERT_TRUE(e.set_attr(kComm, kA, keys[i], i % 2 ? Binding::FortranAint : Binding::C, i + 1).ok());
  EXPECT_GT(e.attribute_bytes(), 0u);
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  EXPECT_EQ(s.deletes, 8);
  EXPECT_EQ(e.attribute_bytes(), 0u);  // (no object left, no cell in use)
}

}  // namespace
