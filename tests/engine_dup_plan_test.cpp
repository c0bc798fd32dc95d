// engine_dup_plan_test: the dup's kept plans and its quick copies (Engine::dup_object). An object
// keeps the plan of its dup (what becomes of each attribute, its copy callbacks' calls) while its
// attributes do not change, and a dup whose callbacks all give back the value they were given
// copies the records as they are (same slots, same set orders, the copy's next order the old
// object's). An object whose attributes a dup copies as they are, with no callback to call
// (MPI_COMM_DUP_FN), keeps a flat plan (its records' slots and keyvals) that the next such dup and
// the free of it or of its copies go through. These tests change what a kept plan depends on between dups, and check what such a
// copy must still be: found, set where the dup was, counted on its keyvals, deleted newest first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attrcheck/engine.hpp"
#include "engine_plan_support.hpp"

namespace {

using namespace attrcheck;
using namespace plan_test;

// Every change of A's attributes between two dups reaches the next dup: a new value, a deleted
// attribute, a new one, a value a callback changes (the general way), and a keyval that copies
// nothing. A plan kept past any of them would give the callbacks, or the copy, what A held before.
TEST(EngineDupPlan, KeptPlanFollowsEveryChange) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 6; ++i) {
    keys.push_back(make_key(e, &log));
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, 100 + i).ok());
  }
  auto dup_and_check = [&](const std::vector<std::uint64_t>& want_in, const std::vector<int>& want_flag,
                           const std::vector<std::uint64_t>& want_value) {
    log.copied_in.clear();
    ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
    EXPECT_EQ(log.copied_in, want_in);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      int flag;
      const std::uint64_t v = value_of(e, kB, keys[i], &flag);
      EXPECT_EQ(flag, want_flag[i]) << i;
      if (flag) {
        EXPECT_EQ(v, want_value[i]) << i;
      }
    }
    log.deleted.clear();
    ASSERT_TRUE(e.free_object(kComm, kB).ok());
  };
  dup_and_check({100, 101, 102, 103, 104, 105}, {1, 1, 1, 1, 1, 1}, {100, 101, 102, 103, 104, 105});
  dup_and_check({100, 101, 102, 103, 104, 105}, {1, 1, 1, 1, 1, 1}, {100, 101, 102, 103, 104, 105});  // (the kept plan)

  ASSERT_TRUE(e.set_attr(kComm, kA, keys[1], Binding::C, 201).ok());  // a new value: keys[1] now newest
  dup_and_check({100, 102, 103, 104, 105, 201}, {1, 1, 1, 1, 1, 1}, {100, 201, 102, 103, 104, 105});

  ASSERT_TRUE(e.delete_attr(kComm, kA, keys[3]).ok());
  dup_and_check({100, 102, 104, 105, 201}, {1, 1, 1, 0, 1, 1}, {100, 201, 102, 0, 104, 105});

  ASSERT_TRUE(e.set_attr(kComm, kA, keys[3], Binding::C, 303).ok());
  dup_and_check({100, 102, 104, 105, 201, 303}, {1, 1, 1, 1, 1, 1}, {100, 201, 102, 303, 104, 105});

  log.bump = true;  // the callbacks change every value: the general placing
  dup_and_check({100, 102, 104, 105, 201, 303}, {1, 1, 1, 1, 1, 1}, {101, 202, 103, 304, 105, 106});
  log.bump = false;
  dup_and_check({100, 102, 104, 105, 201, 303}, {1, 1, 1, 1, 1, 1}, {100, 201, 102, 303, 104, 105});

  // An attribute whose keyval copies nothing: the others are still copied, found where they are.
  const KeyvalId none = make_key(e, &log, CopyAction::NullCopy);
  ASSERT_TRUE(e.set_attr(kComm, kA, none, Binding::C, 9).ok());
  dup_and_check({100, 102, 104, 105, 201, 303}, {1, 1, 1, 1, 1, 1}, {100, 201, 102, 303, 104, 105});
  int flag;
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  value_of(e, kB, none, &flag);
  EXPECT_EQ(flag, 0);
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), 1u);
  EXPECT_EQ(attributes_of(e, none), 1u);
}

// A copy made as the records are: every attribute found with its value, set where the dup was
// (not where the original was set), counted once more on its keyval; a set on the copy afterwards
// is its newest (its next order follows the old object's), so its free deletes that one first and
// the rest newest first; the old object keeps its own order and provenance.
TEST(EngineDupPlan, QuickCopyKeepsOrderProvenanceAndCounts) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 8; ++i) {
    keys.push_back(make_key(e, &log));
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, 10 + i, /*origin=*/1).ok());
  }
  // Set order with gaps and out of creation order: keys[0] and keys[2] set again, newest last.
  ASSERT_TRUE(e.set_attr(kComm, kA, keys[2], Binding::C, 12, 2).ok());
  ASSERT_TRUE(e.set_attr(kComm, kA, keys[0], Binding::C, 10, 3).ok());
  std::vector<KeyvalId> order = {keys[1], keys[3], keys[4], keys[5], keys[6], keys[7], keys[2], keys[0]};

  ASSERT_TRUE(e.dup_object(kComm, kA, kC).ok());  // (the plan made)
  ASSERT_TRUE(e.dup_object(kComm, kA, kB, /*origin=*/42).ok());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    int flag;
    EXPECT_EQ(value_of(e, kB, keys[i], &flag), 10 + i);
    EXPECT_EQ(flag, 1);
    EXPECT_EQ(attributes_of(e, keys[i]), 3u);
  }
  for (const AttributeInfo& a : e.attributes(kComm, kB)) EXPECT_EQ(a.set_at, 42u) << a.keyval;
  for (const AttributeInfo& a : e.attributes(kComm, kA)) EXPECT_NE(a.set_at, 42u) << a.keyval;

  const KeyvalId late = make_key(e, &log);
  ASSERT_TRUE(e.set_attr(kComm, kB, late, Binding::C, 77).ok());
  log.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  std::vector<KeyvalId> want = {late};
  want.insert(want.end(), order.rbegin(), order.rend());
  EXPECT_EQ(log.deleted, want);
  for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), 2u);
  EXPECT_EQ(attributes_of(e, late), 0u);

  log.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  EXPECT_EQ(log.deleted, std::vector<KeyvalId>(order.rbegin(), order.rend()));
  log.deleted.clear();
  ASSERT_TRUE(e.free_object(kComm, kC).ok());
  EXPECT_EQ(log.deleted, std::vector<KeyvalId>(order.rbegin(), order.rend()));
  for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), 0u);
}

// A copy made as the records are takes the old object's free plan (each delete callback's call):
// its free runs them newest first with the values it holds. A change to the copy before its free
// (a value set again, an attribute deleted) is what its free sees; so is a change to the old
// object for the next copy's. A plan kept past a change would pass the old value, or run the
// callback of an attribute already deleted.
TEST(EngineDupPlan, QuickCopyFreesWithThePlanUntilItChanges) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(make_key(e, &log));
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, 20 + i).ok());
  }
  auto free_and_check = [&](Handle h, const std::vector<KeyvalId>& want, const std::vector<std::uint64_t>& values) {
    log.deleted.clear();
    log.deleted_values.clear();
    ASSERT_TRUE(e.free_object(kComm, h).ok());
    EXPECT_EQ(log.deleted, want);
    EXPECT_EQ(log.deleted_values, values);
  };
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  free_and_check(kB, {keys[4], keys[3], keys[2], keys[1], keys[0]}, {24, 23, 22, 21, 20});
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());  // (the plan kept)
  free_and_check(kB, {keys[4], keys[3], keys[2], keys[1], keys[0]}, {24, 23, 22, 21, 20});

  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  log.deleted.clear();
  ASSERT_TRUE(e.set_attr(kComm, kB, keys[2], Binding::C, 92).ok());  // (runs the old value's callback)
  ASSERT_TRUE(e.delete_attr(kComm, kB, keys[0]).ok());
  free_and_check(kB, {keys[2], keys[4], keys[3], keys[1]}, {92, 24, 23, 21});

  ASSERT_TRUE(e.set_attr(kComm, kA, keys[1], Binding::C, 81).ok());
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  free_and_check(kB, {keys[1], keys[4], keys[3], keys[2], keys[0]}, {81, 24, 23, 22, 20});
  ASSERT_TRUE(e.dup_object(kComm, kA, kC).ok());
  free_and_check(kC, {keys[1], keys[4], keys[3], keys[2], keys[0]}, {81, 24, 23, 22, 20});
  free_and_check(kA, {keys[1], keys[4], keys[3], keys[2], keys[0]}, {81, 24, 23, 22, 20});
  for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), 0u);
}

// A dup of A made from inside one of A's own copy callbacks (A held by the outer dup) plans in
// vectors of its own: the outer dup's kept plan, which it is walking, stays as it is.
struct Nested {
  static inline Engine* e = nullptr;
  static inline int calls = 0;
  static inline Result inner;
  static int copy(Handle, int, void*, void* in, void* out, int* flag) {
    if (calls++ == 1) inner = e->dup_object(kComm, kA, kC);
    *static_cast<void**>(out) = in;
    *flag = 1;
    return 0;
  }
};
TEST(EngineDupPlan, ADupFromACopyCallbackLeavesTheKeptPlanAlone) {
  Engine e;
  Nested::e = &e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 4; ++i) {
    KeyvalSpec spec;
    spec.kind = kComm;
    spec.copy = CopyCallback{CopyAction::User, reinterpret_cast<void*>(&Nested::copy), false};
    KeyvalId k = -1;
    ASSERT_EQ(e.create_keyval(spec, &k).status, Status::Ok);
    keys.push_back(k);
    ASSERT_TRUE(e.set_attr(kComm, kA, k, Binding::C, 50 + i).ok());
  }
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());  // the second callback dups A into C
  EXPECT_TRUE(Nested::inner.ok());
  EXPECT_EQ(Nested::calls, 8);
  for (const Handle h : {kB, kC}) {
    for (int i = 0; i < 4; ++i) {
      int flag;
      EXPECT_EQ(value_of(e, h, keys[i], &flag), 50u + i);
      EXPECT_EQ(flag, 1);
    }
  }
  for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), 3u);
}

// MPI_COMM_DUP_FN / MPI_COMM_NULL_DELETE_FN keyvals (the predefined callbacks): the first dup
// of A makes its flat plan, the later ones copy through it, and the copies' frees drop through
// it. Every change of A between dups reaches the next copy: a value set again, an attribute
// deleted (its slot emptied or refilled by the backward shift), new ones (the table grown, its
// records moved). A plan kept past a change would copy the records it listed, not those A holds.
TEST(EngineDupPlan, FlatPlanFollowsEveryChange) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 6; ++i) {
    keys.push_back(make_key(e, &log, CopyAction::Dup, DeleteAction::NullDelete));
    values.push_back(100 + i);
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, values.back(), /*origin=*/1).ok());
  }
  auto dup_and_check = [&](Handle h, Origin at) {
    ASSERT_TRUE(e.dup_object(kComm, kA, h, at).ok());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      int flag;
      const std::uint64_t v = value_of(e, h, keys[i], &flag);
      EXPECT_EQ(flag, values[i] != 0) << i;
      if (flag) {
        EXPECT_EQ(v, values[i]) << i;
      }
    }
    std::size_t present = 0;
    for (const std::uint64_t v : values) present += v != 0;
    const std::vector<AttributeInfo> attrs = e.attributes(kComm, h);
    EXPECT_EQ(attrs.size(), present);
    for (const AttributeInfo& a : attrs) EXPECT_EQ(a.set_at, at) << a.keyval;
  };
  auto counts_are = [&](std::uint32_t holders) {
    for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(attributes_of(e, keys[i]), values[i] ? holders : 0u) << i;
  };
  dup_and_check(kB, 7);  // (the plan made)
  dup_and_check(kC, 8);  // (through it)
  counts_are(3);
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  ASSERT_TRUE(e.free_object(kComm, kC).ok());
  counts_are(1);

  values[1] = 201;  // a value set again
  ASSERT_TRUE(e.set_attr(kComm, kA, keys[1], Binding::C, values[1]).ok());
  dup_and_check(kB, 9);
  dup_and_check(kC, 10);
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  ASSERT_TRUE(e.free_object(kComm, kC).ok());

  values[3] = 0;  // an attribute deleted
  ASSERT_TRUE(e.delete_attr(kComm, kA, keys[3]).ok());
  dup_and_check(kB, 11);
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  dup_and_check(kB, 12);
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  counts_are(1);

  values[3] = 303;  // set again, and enough new ones to grow A's table
  ASSERT_TRUE(e.set_attr(kComm, kA, keys[3], Binding::C, values[3]).ok());
  dup_and_check(kB, 13);
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  for (int i = 0; i < 20; ++i) {
    keys.push_back(make_key(e, &log, CopyAction::Dup, DeleteAction::NullDelete));
    values.push_back(400 + i);
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, values.back()).ok());
  }
  dup_and_check(kB, 14);
  dup_and_check(kC, 15);
  counts_are(3);

  // A copy is changed: its own free and its own copy see what it holds, A is untouched.
  ASSERT_TRUE(e.set_attr(kComm, kB, keys[0], Binding::C, 555).ok());
  ASSERT_TRUE(e.delete_attr(kComm, kB, keys[2]).ok());
  int flag;
  ASSERT_TRUE(e.dup_object(kComm, kB, kD).ok());
  EXPECT_EQ(value_of(e, kD, keys[0], &flag), 555u);
  value_of(e, kD, keys[2], &flag);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(value_of(e, kA, keys[0], &flag), values[0]);
  for (const Handle h : {kB, kC, kD}) ASSERT_TRUE(e.free_object(kComm, h).ok());
  counts_are(1);
  EXPECT_TRUE(log.deleted.empty());  // (no delete function anywhere)
}

// A keyval freed while attributes hold it lives until the last one goes, whichever way the objects
// are freed (through the flat plan or not).
TEST(EngineDupPlan, FlatFreeLetsAFreedKeyvalGoWithItsLastAttribute) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 4; ++i) {
    keys.push_back(make_key(e, &log, CopyAction::Dup, DeleteAction::NullDelete));
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, 60 + i).ok());
  }
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  ASSERT_TRUE(e.dup_object(kComm, kA, kC).ok());  // (through the plan)
  KeyvalId freed = keys[1];
  ASSERT_TRUE(e.free_keyval(kComm, &freed).ok());
  KeyvalInfo info;
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  ASSERT_TRUE(e.keyval_info(keys[1], &info));
  EXPECT_FALSE(info.destroyed);
  EXPECT_EQ(info.attributes, 2u);
  ASSERT_TRUE(e.free_object(kComm, kC).ok());
  ASSERT_TRUE(e.free_object(kComm, kA).ok());
  EXPECT_TRUE(!e.keyval_info(keys[1], &info) || info.destroyed);
  for (const KeyvalId k : {keys[0], keys[2], keys[3]}) EXPECT_EQ(attributes_of(e, k), 0u);
}

// A keyval that copies by MPI_COMM_DUP_FN but has a delete function of its own: the dup copies
// through the flat plan, but each free still calls it for every attribute, newest first.
TEST(EngineDupPlan, FlatPlanStillCallsADeleteFunction) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  keys.push_back(make_key(e, &log, CopyAction::Dup, DeleteAction::NullDelete));
  keys.push_back(make_key(e, &log, CopyAction::Dup, DeleteAction::User));
  keys.push_back(make_key(e, &log, CopyAction::Dup, DeleteAction::NullDelete));
  for (std::size_t i = 0; i < keys.size(); ++i) ASSERT_TRUE(e.set_attr(kComm, kA, keys[i], Binding::C, 70 + i).ok());
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
    log.deleted.clear();
    log.deleted_values.clear();
    ASSERT_TRUE(e.free_object(kComm, kB).ok());
    EXPECT_EQ(log.deleted, std::vector<KeyvalId>{keys[1]}) << round;
    EXPECT_EQ(log.deleted_values, std::vector<std::uint64_t>{71}) << round;
  }
  for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), 1u);
}

}  // namespace

// The free's quick step between two callbacks (Engine::Impl::free_step: a kept plan, no observer,
// the lock dropped, as the runtime runs below MPI_THREAD_MULTIPLE). Each delete callback must
// find the attributes deleted before it gone and the others (its own included) still there, and
// the version must have moved since the callback before it (cached answers do not outlive a
// deletion); a callback that frees its keyval, and one that fails, leave the rest of the run to
// the general step.
struct Seen {
  Engine* e = nullptr;
  Handle object = 0;
  std::vector<KeyvalId> keys;       // oldest first
  std::vector<std::vector<int>> present;  // per callback: the flag of a get of each key
  std::vector<std::uint64_t> versions;
  KeyvalId free_its_keyval = 0;     // this key's callback frees its keyval
  std::uint64_t fail_value = 0;     // a callback given this value fails
};
Seen* g_seen = nullptr;
int seeing_delete(Handle h, int key, void* value, void*) {
  Seen& s = *g_seen;
  std::vector<int> flags;
  for (const KeyvalId k : s.keys) {
    std::uint64_t v = 0;
    int flag = -1;
    s.e->get_attr(kComm, h, k, Binding::C, &v, &flag);
    flags.push_back(flag);
  }
  s.present.push_back(flags);
  s.versions.push_back(s.e->version());
  if (key == s.free_its_keyval) {
    KeyvalId k = key;
    EXPECT_TRUE(s.e->free_keyval(kComm, &k).ok());
  }
  return reinterpret_cast<std::uintptr_t>(value) == s.fail_value ? 9 : 0;
}

TEST(EngineDupPlan, TheFreesQuickStepDeletesEachAttributeBeforeTheNextCallback) {
  Engine e;
  e.drop_locking();
  Seen seen;
  seen.e = &e;
  g_seen = &seen;
  Log log;
  for (int i = 0; i < 6; ++i) {
    KeyvalSpec spec;
    spec.kind = kComm;
    spec.copy = CopyCallback{CopyAction::User, reinterpret_cast<void*>(&identity_copy), false};
    spec.del = DeleteCallback{DeleteAction::User, reinterpret_cast<void*>(&seeing_delete), false};
    spec.extra_state = reinterpret_cast<std::uintptr_t>(&log);
    KeyvalId k = -1;
    ASSERT_TRUE(e.create_keyval(spec, &k).ok());
    seen.keys.push_back(k);
  }
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  for (std::size_t i = 0; i < seen.keys.size(); ++i)
    ASSERT_TRUE(e.set_attr(kComm, kA, seen.keys[i], Binding::C, 100 + i).ok());
  const std::size_t n = seen.keys.size();
  auto check_run = [&](std::size_t first, std::size_t calls) {
    ASSERT_EQ(seen.present.size(), calls);
    for (std::size_t c = 0; c < calls; ++c) {
      const std::size_t running = first - c;  // newest first
      for (std::size_t j = 0; j < n; ++j) {
        // (A get with a keyval the user freed fails: the flag stays -1.)
        const bool freed = seen.keys[j] == seen.free_its_keyval && running < j;
        EXPECT_EQ(seen.present[c][j], freed ? -1 : j <= running ? 1 : 0) << "callback " << c << ", key " << j;
      }
      if (c) {
        EXPECT_NE(seen.versions[c], seen.versions[c - 1]);
      }
    }
  };
  // A copy of kA frees through kA's plan, every step the quick one.
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  seen.object = kB;
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  check_run(n - 1, n);
  // A copy whose callback for the value 103 fails: the run stops there, the newer ones deleted.
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  seen.present.clear();
  seen.versions.clear();
  seen.fail_value = 103;
  EXPECT_EQ(e.free_object(kComm, kB).status, Status::CallbackFailed);
  check_run(n - 1, n - 3);
  for (std::size_t j = 0; j < n; ++j) {
    int flag = -1;
    value_of(e, kB, seen.keys[j], &flag);
    EXPECT_EQ(flag, j <= 3 ? 1 : 0) << "key " << j;
  }
  seen.fail_value = 0;
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  // A copy whose callback for keys[4] frees its keyval (kA still holds it): the steps after it are
  // the general one's; the rest of the run as before.
  ASSERT_TRUE(e.dup_object(kComm, kA, kB).ok());
  seen.present.clear();
  seen.versions.clear();
  seen.free_its_keyval = seen.keys[4];
  ASSERT_TRUE(e.free_object(kComm, kB).ok());
  check_run(n - 1, n);
  KeyvalInfo info;
  ASSERT_TRUE(e.keyval_info(seen.keys[4], &info));
  EXPECT_TRUE(info.user_freed);
  EXPECT_EQ(info.attributes, 1u);  // kA's
  seen.free_its_keyval = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i == 4) continue;
    ASSERT_TRUE(e.keyval_info(seen.keys[i], &info));
    EXPECT_EQ(info.attributes, 1u);
  }
  g_seen = nullptr;
}
