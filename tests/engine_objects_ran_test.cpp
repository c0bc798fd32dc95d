// engine_objects_ran_test: Engine::dup_object_ran and Engine::free_object_ran, the mirror of a
// dup or free whose callbacks ran elsewhere (the runtime's shadow mode). They must do exactly what
// dup_object / free_object would have done, call nothing, and take only the plain case: anything
// else answers false with nothing changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attrcheck/engine.hpp"

namespace {

using namespace attrcheck;

constexpr ObjectKind kComm = ObjectKind::Comm;
constexpr Handle kA = 0x1000, kB = 0x2000, kC = 0x3000, kWorld = 0x3091D;
constexpr Handle kNever = 0xDEAD;

// Counts the calls of the keyvals' callbacks (extra_state points at the counter): the *_ran
// calls must make none.
struct Calls {
  int copies = 0, deletes = 0;
};
int count_copy(Handle, int, void* extra, void* in, void* out, int* flag) {
  ++static_cast<Calls*>(extra)->copies;
  *static_cast<std::uint64_t*>(out) = reinterpret_cast<std::uintptr_t>(in) + 100;
  *flag = 1;
  return 0;
}
int count_delete(Handle, int, void*, void* extra) {
  ++static_cast<Calls*>(extra)->deletes;
  return 0;
}

KeyvalId make_key(Engine& e, Calls* calls, CopyAction copy = CopyAction::User,
                  DeleteAction del = DeleteAction::User) {
  KeyvalSpec s;
  s.kind = kComm;
  s.copy = CopyCallback{copy, copy == CopyAction::User ? reinterpret_cast<void*>(&count_copy) : nullptr, false};
  s.del = DeleteCallback{del, del == DeleteAction::User ? reinterpret_cast<void*>(&count_delete) : nullptr, false};
  s.extra_state = reinterpret_cast<std::uintptr_t>(calls);
  KeyvalId k = -1;
  EXPECT_EQ(e.create_keyval(s, &k).status, Status::Ok);
  return k;
}

struct Attr {
  KeyvalId keyval;
  Binding repr;
  std::uint64_t value;
  bool predefined;
  bool operator==(const Attr& o) const {
    return keyval == o.keyval && repr == o.repr && value == o.value && predefined == o.predefined;
  }
};
// An object's attributes, oldest first.
std::vector<Attr> attrs(const Engine& e, Handle h) {
  std::vector<Attr> out;
  for (const AttributeInfo& a : e.attributes(kComm, h)) out.push_back({a.keyval, a.repr, a.value, a.predefined});
  return out;
}
bool registered(const Engine& e, Handle h) {
  ObjectInfo info;
  return e.object_info(kComm, h, &info);
}
std::uint32_t uses(const Engine& e, KeyvalId k) {
  KeyvalInfo info;
  EXPECT_TRUE(e.keyval_info(k, &info));
  return info.attributes;
}

// Keyvals of every kind a dup treats differently, set on kA in the order u1, plain, dup, u2, u3
// (u3 last: the newest), plus a copied and a not-copied predefined attribute.
struct Fixture {
  Calls calls;
  Engine e;
  KeyvalId u1, plain, dup, u2, u3;
  Fixture() {
    EXPECT_EQ(e.register_predefined_keyval(kComm, 1, "COPIED", true).status, Status::Ok);
    EXPECT_EQ(e.register_predefined_keyval(kComm, 2, "NOT_COPIED", false).status, Status::Ok);
    u1 = make_key(e, &calls);
    plain = make_key(e, &calls, CopyAction::NullCopy, DeleteAction::NullDelete);
    dup = make_key(e, &calls, CopyAction::Dup, DeleteAction::NullDelete);
    u2 = make_key(e, &calls);
    u3 = make_key(e, &calls);
    EXPECT_EQ(e.create_object(kComm, kA).status, Status::Ok);
    EXPECT_EQ(e.install_predefined(kComm, kA, 1, Binding::FortranInt, 32767).status, Status::Ok);
    EXPECT_EQ(e.install_predefined(kComm, kA, 2, Binding::C, 0xBA5E).status, Status::Ok);
    for (const auto& [k, v] : {std::pair{u1, 11}, {plain, 12}, {dup, 13}, {u2, 14}, {u3, 15}})
      EXPECT_EQ(e.set_attr(kComm, kA, k, Binding::C, static_cast<std::uint64_t>(v)).status, Status::Ok);
  }
  // The copy callbacks the standard requires for a dup of kA (u2 declines to copy), in the
  // library's order (here: newest first, as MPICH runs them).
  std::vector<RanCopy> copies() const {
    return {RanCopy{u3, 0, 1, 15, 115}, RanCopy{u2, 0, 0, 14, 0}, RanCopy{u1, 0, 1, 11, 111}};
  }
  std::vector<RanDelete> deletes(Handle h) const {
    return {RanDelete{h, u3, 15, 0}, RanDelete{h, u2, 14, 0}, RanDelete{h, u1, 11, 0}};
  }
};

TEST(DupObjectRan, CopiesAsDupObjectWouldWithoutCallingAnything) {
  Fixture f;
  Engine& e = f.e;
  const std::vector<RanCopy> ran = f.copies();
  ASSERT_TRUE(e.dup_object_ran(kComm, kA, kB, ran.data(), ran.size(), 7));
  EXPECT_EQ(f.calls.copies, 0);
  // What dup_object makes of the same callbacks (count_copy adds 100; u2 said no the first time,
  // so it is removed from kA before the comparison dup).
  const std::vector<Attr> want{{1, Binding::FortranInt, 32767, true},
                               {f.u1, Binding::C, 111, false},
                               {f.dup, Binding::C, 13, false},
                               {f.u3, Binding::C, 115, false}};
  EXPECT_EQ(attrs(e, kB), want);  // in kA's set order
  for (const AttributeInfo& a : e.attributes(kComm, kB)) EXPECT_EQ(a.set_at, 7u);
  EXPECT_EQ(uses(e, f.u1), 2u);
  EXPECT_EQ(uses(e, f.u2), 1u);
  EXPECT_EQ(uses(e, f.dup), 2u);
  EXPECT_EQ(uses(e, f.plain), 1u);
  ASSERT_EQ(e.delete_attr(kComm, kA, f.u2).status, Status::Ok);
  ASSERT_EQ(e.dup_object(kComm, kA, kC).status, Status::Ok);
  EXPECT_EQ(attrs(e, kC), want);
  // The copy is an object like any other: its attributes are found, replaced and deleted in
  // their set order (newest first on free), and a later set is the newest.
  std::uint64_t v = 0;
  int flag = 0;
  ASSERT_EQ(e.get_attr(kComm, kB, f.u3, Binding::C, &v, &flag).status, Status::Ok);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(v, 115u);
  ASSERT_EQ(e.set_attr(kComm, kB, f.u1, Binding::C, 21).status, Status::Ok);
  EXPECT_EQ(attrs(e, kB).back(), (Attr{f.u1, Binding::C, 21, false}));
  f.calls = Calls{};
  ASSERT_EQ(e.free_object(kComm, kB).status, Status::Ok);
  EXPECT_EQ(f.calls.deletes, 2);  // u1, u3 (u2 was not copied; dup and the predefined ones have none)
  EXPECT_FALSE(registered(e, kB));
  EXPECT_EQ(uses(e, f.u1), 2u);  // kA and kC
}

TEST(DupObjectRan, AnObjectWithoutAttributesToo) {
  Calls calls;
  Engine e;
  const KeyvalId k = make_key(e, &calls);
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  ASSERT_TRUE(e.dup_object_ran(kComm, kA, kB, nullptr, 0));
  EXPECT_TRUE(attrs(e, kB).empty());
  const RanCopy stray{k, 0, 1, 0, 0};
  EXPECT_FALSE(e.dup_object_ran(kComm, kA, kC, &stray, 1));  // a callback for nothing set
  EXPECT_FALSE(registered(e, kC));
}

// Anything but exactly the copy callbacks the standard requires, each once and successful.
TEST(DupObjectRan, RefusesAnythingButTheRequiredCallsAndChangesNothing) {
  Fixture f;
  Engine& e = f.e;
  const std::vector<RanCopy> good = f.copies();
  std::vector<std::vector<RanCopy>> bad;
  bad.push_back({good[0], good[1]});                  // u1's missing
  bad.push_back({good[0], good[1], good[2], good[2]});  // u1's twice
  auto changed = good;
  changed[0].rc = 5;  // failed
  bad.push_back(changed);
  changed = good;
  changed[0].flag = 2;  // neither 0 nor 1: the host asks the library what it made of it
  bad.push_back(changed);
  changed = good;
  changed[2].value_in = 99;  // passed another value than the attribute's
  bad.push_back(changed);
  changed = good;
  changed.push_back(RanCopy{f.plain, 0, 1, 12, 12});  // a keyval with no copy callback
  bad.push_back(changed);
  changed = good;
  changed.push_back(RanCopy{f.dup, 0, 1, 13, 13});
  bad.push_back(changed);
  changed = good;
  changed.push_back(RanCopy{1, 0, 1, 32767, 1});  // a predefined attribute
  bad.push_back(changed);
  const std::uint64_t version = e.version();
  for (const std::vector<RanCopy>& ran : bad) {
    EXPECT_FALSE(e.dup_object_ran(kComm, kA, kB, ran.data(), ran.size()));
    EXPECT_FALSE(registered(e, kB));
  }
  EXPECT_FALSE(e.dup_object_ran(kComm, kNever, kB, good.data(), good.size()));  // unknown
  ASSERT_EQ(e.create_object(kComm, kC).status, Status::Ok);
  const std::uint64_t with_c = e.version();
  EXPECT_FALSE(e.dup_object_ran(kComm, kA, kC, good.data(), good.size()));  // new handle taken
  EXPECT_EQ(e.version(), with_c);
  EXPECT_NE(version, with_c);
  EXPECT_EQ(uses(e, f.u1), 1u);
  EXPECT_EQ(f.calls.copies, 0);
  EXPECT_TRUE(e.dup_object_ran(kComm, kA, kB, good.data(), good.size()));
}

// Every attribute copied (the one-pass way): copies in the same slots, and a run found wrong
// part-way through undoes what was copied before it.
TEST(DupObjectRan, EveryAttributeCopiedInOnePassAndUndoneWhenOneRunIsWrong) {
  Calls calls;
  Engine e;
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 20; ++i)
    keys.push_back(make_key(e, &calls, i % 3 ? CopyAction::User : CopyAction::Dup, DeleteAction::User));
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  std::vector<RanCopy> ran;
  std::vector<Attr> want;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(e.set_attr(kComm, kA, keys[i], Binding::C, 1000 + i).status, Status::Ok);
    const bool user = i % 3 != 0;
    if (user) ran.push_back(RanCopy{keys[i], 0, 1, 1000 + i, 2000 + i});
    want.push_back({keys[i], Binding::C, (user ? 2000u : 1000u) + i, false});
  }
  std::reverse(ran.begin(), ran.end());
  for (std::size_t wrong = 0; wrong < ran.size(); ++wrong) {
    std::vector<RanCopy> bad = ran;
    bad[wrong].value_in = 1;
    EXPECT_FALSE(e.dup_object_ran(kComm, kA, kB, bad.data(), bad.size())) << wrong;
    EXPECT_FALSE(registered(e, kB));
    for (const KeyvalId k : keys) EXPECT_EQ(uses(e, k), 1u) << wrong;
  }
  ASSERT_TRUE(e.dup_object_ran(kComm, kA, kB, ran.data(), ran.size()));
  EXPECT_EQ(attrs(e, kB), want);
  for (const KeyvalId k : keys) {
    EXPECT_EQ(uses(e, k), 2u);
    std::uint64_t v = 0;
    int flag = 0;
    ASSERT_EQ(e.get_attr(kComm, kB, k, Binding::C, &v, &flag).status, Status::Ok);
    EXPECT_EQ(flag, 1) << k;
  }
  EXPECT_EQ(calls.copies, 0);
  // Deleting from the copy keeps every other attribute reachable (the probe sequences held).
  for (std::size_t i = 0; i < keys.size(); i += 2) ASSERT_EQ(e.delete_attr(kComm, kB, keys[i]).status, Status::Ok);
  for (std::size_t i = 1; i < keys.size(); i += 2) {
    std::uint64_t v = 0;
    int flag = 0;
    ASSERT_EQ(e.get_attr(kComm, kB, keys[i], Binding::C, &v, &flag).status, Status::Ok);
    EXPECT_EQ(flag, 1) << i;
  }
}

TEST(DupObjectRan, FortranValuesAndCallbacksGoTheHostsWay) {
  Fixture f;
  Engine& e = f.e;
  ASSERT_EQ(e.set_attr(kComm, kA, f.u1, Binding::FortranAint, 11).status, Status::Ok);
  std::vector<RanCopy> ran = f.copies();
  EXPECT_FALSE(e.dup_object_ran(kComm, kA, kB, ran.data(), ran.size()));  // only the host knows its storage
  EXPECT_FALSE(registered(e, kB));
  // A value copied as it is (MPI_COMM_DUP_FN) may be a Fortran one: it gets its own cell.
  ASSERT_EQ(e.set_attr(kComm, kA, f.u1, Binding::C, 11).status, Status::Ok);
  ASSERT_EQ(e.set_attr(kComm, kA, f.dup, Binding::FortranAint, -3).status, Status::Ok);
  ASSERT_TRUE(e.dup_object_ran(kComm, kA, kB, ran.data(), ran.size()));
  std::int64_t v = 0;
  int flag = 0;
  ASSERT_EQ(e.get_attr(kComm, kB, f.dup, Binding::FortranAint, &v, &flag).status, Status::Ok);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(v, -3);
  ASSERT_EQ(e.free_object(kComm, kA).status, Status::Ok);  // the copy's cell is its own
  ASSERT_EQ(e.get_attr(kComm, kB, f.dup, Binding::FortranAint, &v, &flag).status, Status::Ok);
  EXPECT_EQ(v, -3);
}

TEST(FreeObjectRan, DropsTheObjectAsFreeObjectWouldWithoutCallingAnything) {
  Fixture f;
  Engine& e = f.e;
  KeyvalId u1 = f.u1;
  ASSERT_EQ(e.free_keyval(kComm, &u1).status, Status::Ok);  // alive through its attribute
  const std::vector<RanDelete> ran = f.deletes(kA);
  const std::uint64_t layout = e.layout_version();
  ASSERT_TRUE(e.free_object_ran(kComm, kA, ran.data(), ran.size()));
  EXPECT_EQ(f.calls.deletes, 0);
  EXPECT_FALSE(registered(e, kA));
  EXPECT_NE(e.layout_version(), layout);
  KeyvalInfo info;
  ASSERT_TRUE(e.keyval_info(f.u1, &info));
  EXPECT_TRUE(info.destroyed);  // its last attribute went
  EXPECT_EQ(uses(e, f.u2), 0u);
  EXPECT_EQ(uses(e, f.plain), 0u);
  std::uint64_t v = 0;
  int flag = 0;
  EXPECT_EQ(e.get_attr(kComm, kA, f.u2, Binding::C, &v, &flag).status, Status::ObjectUnknown);
  // The handle can come back as a new object.
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  EXPECT_TRUE(attrs(e, kA).empty());
}

TEST(FreeObjectRan, RefusesAnythingButTheRequiredCallsAndChangesNothing) {
  Fixture f;
  Engine& e = f.e;
  const std::vector<RanDelete> good = f.deletes(kA);
  std::vector<std::vector<RanDelete>> bad;
  bad.push_back({good[0], good[1]});
  bad.push_back({good[0], good[1], good[2], good[2]});
  auto changed = good;
  changed[1].rc = 3;
  bad.push_back(changed);
  changed = good;
  changed[1].value = 99;
  bad.push_back(changed);
  changed = good;
  changed[1].object = kB;
  bad.push_back(changed);
  changed = good;
  changed.push_back(RanDelete{kA, f.plain, 12, 0});  // no delete callback
  bad.push_back(changed);
  changed = good;
  changed.push_back(RanDelete{kA, 2, 0xBA5E, 0});  // predefined
  bad.push_back(changed);
  const std::uint64_t version = e.version();
  const std::vector<Attr> before = attrs(e, kA);
  for (const std::vector<RanDelete>& ran : bad) EXPECT_FALSE(e.free_object_ran(kComm, kA, ran.data(), ran.size()));
  EXPECT_FALSE(e.free_object_ran(kComm, kNever, nullptr, 0));
  EXPECT_EQ(e.version(), version);
  EXPECT_EQ(attrs(e, kA), before);
  EXPECT_EQ(uses(e, f.u1), 1u);
  // A predefined object is never freed.
  ASSERT_EQ(e.create_object(kComm, kWorld, kObjectPredefined | kObjectWorld).status, Status::Ok);
  EXPECT_FALSE(e.free_object_ran(kComm, kWorld, nullptr, 0));
  // A Fortran-set value reaches a C callback as an address only the host knows.
  ASSERT_EQ(e.set_attr(kComm, kA, f.u2, Binding::FortranAint, 14).status, Status::Ok);
  EXPECT_FALSE(e.free_object_ran(kComm, kA, good.data(), good.size()));
  ASSERT_EQ(e.set_attr(kComm, kA, f.u2, Binding::C, 14).status, Status::Ok);
  EXPECT_EQ(f.calls.deletes, 2);  // (the two replacing sets)
  EXPECT_TRUE(e.free_object_ran(kComm, kA, good.data(), good.size()));
}

// From inside a callback for the object (re-entrant), the host's way: free_object refuses it.
TEST(FreeObjectRan, NotFromACallbackForTheObject) {
  Engine e;
  struct Inner {
    Engine* e;
    bool answer = true;
  } inner{&e};
  KeyvalSpec s;
  s.kind = kComm;
  s.copy.action = CopyAction::NullCopy;
  s.del = DeleteCallback{DeleteAction::User, reinterpret_cast<void*>(+[](Handle h, int, void*, void* extra) {
                           auto* in = static_cast<Inner*>(extra);
                           in->answer = in->e->free_object_ran(kComm, h, nullptr, 0);
                           return 0;
                         }),
                         false};
  s.extra_state = reinterpret_cast<std::uintptr_t>(&inner);
  KeyvalId k = -1;
  ASSERT_EQ(e.create_keyval(s, &k).status, Status::Ok);
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1).status, Status::Ok);
  ASSERT_EQ(e.delete_attr(kComm, kA, k).status, Status::Ok);
  EXPECT_FALSE(inner.answer);
  EXPECT_TRUE(registered(e, kA));
}

}  // namespace
