// engine_sections_test: no write section opens inside another. This suite links a checking build
// of the engine (attrcheck_engine_checked: ATTRCHECK_CHECK_WRITE_SECTIONS), whose WriteSection
// counts every section opened while the sequence counter is odd (g_nested_write_sections). A
// nested section's end makes the counter even while the outer change is still in progress, so a
// lock-free get could validate a half-done change (free_plain destroying a keyval the user freed
// inside the section that drops the freed object's table did that). Each test takes the engine
// through the paths that end with a keyval destroyed or a table dropped and asserts that the count
// stayed 0; the last one does so over a random mix of every operation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "attrcheck/engine.hpp"
#include "engine/engine_storage.hpp"

namespace {

using namespace attrcheck;
using engine_detail::g_nested_write_sections;

constexpr ObjectKind kComm = ObjectKind::Comm;
constexpr Handle kA = 0x1000, kB = 0x2000, kSelf = 0x5E1F;

int copy_same(Handle, int, void*, void* in, void* out, int* flag) {
  *static_cast<std::uint64_t*>(out) = reinterpret_cast<std::uintptr_t>(in);
  *flag = 1;
  return 0;
}
int delete_ok(Handle, int, void*, void*) { return 0; }
// Fail when the value is 13: a delete callback (a free stops there), a copy callback (the dup is
// rolled back).
int delete_13_fails(Handle, int, void* value, void*) { return reinterpret_cast<std::uintptr_t>(value) == 13 ? 5 : 0; }
int copy_13_fails(Handle h, int k, void* extra, void* in, void* out, int* flag) {
  copy_same(h, k, extra, in, out, flag);
  return reinterpret_cast<std::uintptr_t>(in) == 13 ? 7 : 0;
}

enum class Fails { Never, Copy13, Delete13 };
KeyvalId make_key(Engine& e, bool user, Fails fails = Fails::Never) {
  KeyvalSpec s;
  s.kind = kComm;
  if (user) {
    s.copy = CopyCallback{CopyAction::User, reinterpret_cast<void*>(fails == Fails::Copy13 ? &copy_13_fails : &copy_same), false};
    s.del = DeleteCallback{DeleteAction::User, reinterpret_cast<void*>(fails == Fails::Delete13 ? &delete_13_fails : &delete_ok), false};
  } else {
    s.copy = CopyCallback{CopyAction::Dup, nullptr, false};
    s.del = DeleteCallback{DeleteAction::NullDelete, nullptr, false};
  }
  KeyvalId k = -1;
  EXPECT_EQ(e.create_keyval(s, &k).status, Status::Ok);
  return k;
}

bool destroyed(const Engine& e, KeyvalId k) {
  KeyvalInfo info;
  return e.keyval_info(k, &info) && info.destroyed;
}

class Sections : public ::testing::Test {
 protected:
  void SetUp() override { g_nested_write_sections.store(0); }
  static std::uint64_t nested() { return g_nested_write_sections.load(); }
};

// The free with nothing to call (free_plain) of the last object holding a keyval the user freed:
// the keyval is destroyed after the table's section, not inside it. (Fails without that.)
TEST_F(Sections, AFreeWithNothingToCallDestroysAFreedKeyvalOutsideItsSection) {
  Engine e;
  KeyvalId k = make_key(e, false);
  const KeyvalId id = k;
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 11).status, Status::Ok);
  ASSERT_EQ(e.free_keyval(kComm, &k).status, Status::Ok);
  ASSERT_FALSE(destroyed(e, id));
  ASSERT_EQ(e.free_object(kComm, kA).status, Status::Ok);
  EXPECT_TRUE(destroyed(e, id));
  EXPECT_EQ(nested(), 0u);
}

// The same through the mirror of a free whose callbacks ran elsewhere (shadow mode).
TEST_F(Sections, AMirroredFreeDestroysAFreedKeyvalOutsideItsSection) {
  Engine e;
  KeyvalId k = make_key(e, true);
  const KeyvalId id = k;
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 11).status, Status::Ok);
  ASSERT_EQ(e.free_keyval(kComm, &k).status, Status::Ok);
  const RanDelete ran{kA, id, 11, 0};
  ASSERT_TRUE(e.free_object_ran(kComm, kA, &ran, 1));
  EXPECT_TRUE(destroyed(e, id));
  EXPECT_EQ(nested(), 0u);
}

// A free that calls delete callbacks through its kept plan (the quick step, then the general one
// once the keyvals are freed), a delete and the last free, with the keyvals freed by the user.
TEST_F(Sections, PlannedFreesAndDeletesWithFreedKeyvals) {
  Engine e;
  e.drop_locking();  // (with no observer: the quick step, and its write section written out)
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 6; ++i) keys.push_back(make_key(e, true));
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  for (std::size_t i = 0; i < keys.size(); ++i)
    ASSERT_EQ(e.set_attr(kComm, kA, keys[i], Binding::C, 10 + i).status, Status::Ok);
  ASSERT_EQ(e.dup_object(kComm, kA, kB).status, Status::Ok);  // (the quick copy, with a free plan)
  ASSERT_EQ(e.free_object(kComm, kB).status, Status::Ok);
  ASSERT_EQ(e.dup_object(kComm, kA, kB).status, Status::Ok);
  std::vector<KeyvalId> freed = keys;
  for (KeyvalId& k : freed) ASSERT_EQ(e.free_keyval(kComm, &k).status, Status::Ok);
  ASSERT_EQ(e.free_object(kComm, kB).status, Status::Ok);  // kA still holds every keyval
  for (const KeyvalId k : keys) EXPECT_FALSE(destroyed(e, k));
  ASSERT_EQ(e.delete_attr(kComm, kA, keys[5]).status, Status::Ok);
  EXPECT_TRUE(destroyed(e, keys[5]));
  ASSERT_EQ(e.free_object(kComm, kA).status, Status::Ok);
  for (const KeyvalId k : keys) EXPECT_TRUE(destroyed(e, k));
  EXPECT_EQ(nested(), 0u);
}

// A free through the kept plan (a copy of a copy) whose callbacks' keyvals are freed as it runs,
// and one of whose callbacks fails: the rest is repacked.
TEST_F(Sections, APlannedFreeThatStopsAndOneWhoseKeyvalsWereFreed) {
  Engine e;
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 5; ++i) keys.push_back(make_key(e, true, Fails::Delete13));
  const KeyvalId cf = make_key(e, true, Fails::Copy13);
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  for (std::size_t i = 0; i < keys.size(); ++i)
    ASSERT_EQ(e.set_attr(kComm, kA, keys[i], Binding::C, 20 + i).status, Status::Ok);
  ASSERT_EQ(e.set_attr(kComm, kA, cf, Binding::C, 13).status, Status::Ok);
  EXPECT_EQ(e.dup_object(kComm, kA, kB).status, Status::CallbackFailed);  // rolled back
  ASSERT_EQ(e.delete_attr(kComm, kA, cf).status, Status::Ok);
  ASSERT_EQ(e.dup_object(kComm, kA, kB).status, Status::Ok);  // (the quick copy, with a free plan)
  // keys[0]'s value fails its delete; the others are set again after it, so the free deletes them
  // first and stops there.
  ASSERT_EQ(e.set_attr(kComm, kB, keys[0], Binding::C, 13).status, Status::Ok);
  for (std::size_t i = 1; i < keys.size(); ++i)
    ASSERT_EQ(e.set_attr(kComm, kB, keys[i], Binding::C, 30 + i).status, Status::Ok);
  EXPECT_EQ(e.free_object(kComm, kB).status, Status::CallbackFailed);  // the rest deleted, it repacked
  std::vector<KeyvalId> freed = keys;
  for (KeyvalId& k : freed) ASSERT_EQ(e.free_keyval(kComm, &k).status, Status::Ok);
  EXPECT_EQ(e.set_attr(kComm, kA, keys[0], Binding::C, 1).status, Status::KeyvalFreed);
  EXPECT_EQ(e.delete_attr(kComm, kB, keys[0]).status, Status::CallbackFailed);
  ASSERT_EQ(e.free_object(kComm, kA).status, Status::Ok);
  for (std::size_t i = 1; i < keys.size(); ++i) EXPECT_TRUE(destroyed(e, keys[i]));
  EXPECT_FALSE(destroyed(e, keys[0]));  // (kB still holds it)
  EXPECT_EQ(nested(), 0u);
}

// Finalize, forget, keyval churn and predefined objects.
TEST_F(Sections, FinalizeForgetAndKeyvalChurn) {
  Engine e;
  ASSERT_EQ(e.create_object(kComm, kSelf, kObjectPredefined | kObjectSelf).status, Status::Ok);
  ASSERT_EQ(e.create_object(kComm, kA).status, Status::Ok);
  for (int round = 0; round < 50; ++round) {
    KeyvalId k = make_key(e, round % 2 == 0);
    ASSERT_EQ(e.set_attr(kComm, kSelf, k, Binding::C, 1).status, Status::Ok);
    ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::FortranAint, 2).status, Status::Ok);
    KeyvalId f = k;
    ASSERT_EQ(e.free_keyval(kComm, &f).status, Status::Ok);
    ASSERT_EQ(e.delete_attr(kComm, kA, k).status, Status::Ok);
    if (round % 3 == 0) {
      ASSERT_EQ(e.delete_attr(kComm, kSelf, k).status, Status::Ok);
    }
  }
  ASSERT_EQ(e.forget_object(kComm, kA).status, Status::Ok);
  e.finalize();
  EXPECT_EQ(nested(), 0u);
}

// Every operation in a random mix (values C and Fortran, callbacks that fail now and then, keyvals
// freed while attributes use them), on a few objects.
TEST_F(Sections, ARandomMixOfEveryOperation) {
  Engine e;
  std::mt19937 rng(12);
  std::vector<KeyvalId> keys;
  std::vector<Handle> objects;
  Handle next_handle = 0x10000;
  for (int step = 0; step < 20000; ++step) {
    const int op = static_cast<int>(rng() % 9);
    const Handle h = objects.empty() ? 0 : objects[rng() % objects.size()];
    const KeyvalId k = keys.empty() ? 0 : keys[rng() % keys.size()];
    const std::uint64_t value = 10 + rng() % 8;  // (13 fails the failing keyvals' callbacks)
    switch (op) {
      case 0:
        if (keys.size() < 12) keys.push_back(make_key(e, rng() % 3 != 0, static_cast<Fails>(rng() % 3)));
        break;
      case 1:
        if (k) {
          KeyvalId f = k;
          (void)e.free_keyval(kComm, &f);
          keys.erase(std::find(keys.begin(), keys.end(), k));
        }
        break;
      case 2:
        if (objects.size() < 6) {
          objects.push_back(next_handle++);
          (void)e.create_object(kComm, objects.back());
        }
        break;
      case 3:
      case 4:
        if (h && k) (void)e.set_attr(kComm, h, k, rng() % 5 == 0 ? Binding::FortranAint : Binding::C, value);
        break;
      case 5:
        if (h && k) (void)e.delete_attr(kComm, h, k);
        break;
      case 6:
        if (h && objects.size() < 6 && e.dup_object(kComm, h, next_handle).ok()) objects.push_back(next_handle++);
        break;
      case 7:
      case 8:
        if (h && e.free_object(kComm, h).ok()) objects.erase(std::find(objects.begin(), objects.end(), h));
        break;
    }
  }
  e.finalize();
  EXPECT_EQ(nested(), 0u);
}

}  // namespace
