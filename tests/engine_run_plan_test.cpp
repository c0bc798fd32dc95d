// engine_run_plan_test: the run plan (ObjectSlot::flat_plan with flat_runs), the engine's
// shortcut for dups and frees mirrored from callbacks another cache ran (Engine::dup_object_ran /
// free_object_ran: the runtime's shadow mode). These tests give the runs in the libraries' orders
// and in others, change what a plan depends on between dups, and check that each mirror is what
// it is the general way: what each copy holds, set where, counted on its keyvals, and which runs
// are refused with nothing changed. (The flat plan without runs: engine_dup_plan_test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attrcheck/engine.hpp"
#include "engine_plan_support.hpp"

namespace {

using namespace attrcheck;
using namespace plan_test;

// The library runs the callbacks
// in its own order (MPICH: newest first for the copies and for the copy's deletes; Open MPI: the
// copies by key, the copy's deletes in the reverse order); the engine keeps the first plain dup's
// order and follows it while the runs do. Whatever order the runs come in, and whether they
// follow the plan or not, the mirror must be what it is the general way.

// The copy callbacks of `keys`, in this order, as the library ran them on `from`: each given the
// attribute's value, flag 1, giving back the value + bump.
// (Values read through attributes(): a get refuses a keyval the user freed.)
std::uint64_t held_value(const Engine& e, Handle h, KeyvalId k) {
  for (const AttributeInfo& a : e.attributes(kComm, h))
    if (a.keyval == k) return a.value;
  ADD_FAILURE() << "no attribute " << k;
  return 0;
}
std::vector<RanCopy> copy_runs(Engine& e, Handle from, const std::vector<KeyvalId>& keys, std::uint64_t bump = 0) {
  std::vector<RanCopy> ran;
  for (const KeyvalId k : keys) {
    const std::uint64_t v = held_value(e, from, k);
    ran.push_back(RanCopy{k, 0, 1, v, v + bump});
  }
  return ran;
}
std::vector<RanDelete> delete_runs(Engine& e, Handle h, const std::vector<KeyvalId>& keys) {
  std::vector<RanDelete> ran;
  for (const KeyvalId k : keys) ran.push_back(RanDelete{h, k, held_value(e, h, k), 0});
  return ran;
}
bool dup_ran(Engine& e, Handle from, Handle to, const std::vector<RanCopy>& ran, Origin origin = 0) {
  return e.dup_object_ran(kComm, from, to, ran.data(), ran.size(), origin);
}
bool free_ran(Engine& e, Handle h, const std::vector<RanDelete>& ran) {
  return e.free_object_ran(kComm, h, ran.data(), ran.size());
}
bool registered(const Engine& e, Handle h) {
  ObjectInfo info;
  return e.object_info(kComm, h, &info);
}
std::vector<KeyvalId> reversed(std::vector<KeyvalId> v) {
  std::reverse(v.begin(), v.end());
  return v;
}

// Dups and frees in MPICH's order, in Open MPI's, in an order that is neither, a copy's dup, and
// a dup whose runs change order: each copy holds what its runs gave, set where its dup was, and
// each free drops it, the counts following; nothing is called.
TEST(EngineRunPlan, FollowsTheLibrarysOrder) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 6; ++i) {
    keys.push_back(make_key(e, &log));
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, 10 + i).ok());
  }
  const std::vector<KeyvalId> newest_first = reversed(keys);
  const std::vector<KeyvalId> neither = {keys[2], keys[0], keys[5], keys[1], keys[4], keys[3]};
  auto counts_are = [&](std::uint32_t n) {
    for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), n);
  };
  auto copy_holds = [&](Handle h, std::uint64_t bump, Origin origin) {
    for (std::size_t i = 0; i < keys.size(); ++i) {
      int flag;
      EXPECT_EQ(value_of(e, h, keys[i], &flag), 10 + i + bump) << i;
      EXPECT_EQ(flag, 1) << i;
    }
    for (const AttributeInfo& a : e.attributes(kComm, h)) EXPECT_EQ(a.set_at, origin) << a.keyval;
  };
  // The copy callbacks newest first; the copy's deletes in the same order (MPICH), reversed (Open
  // MPI), in neither (the general way).
  const std::vector<std::vector<KeyvalId>> free_orders = {newest_first, newest_first, keys, neither};
  for (std::size_t round = 0; round < free_orders.size(); ++round) {
    const std::uint64_t bump = 1000 * (round + 1);
    ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, newest_first, bump), static_cast<Origin>(40 + round))) << round;
    copy_holds(kB, bump, static_cast<Origin>(40 + round));
    counts_are(2);
    ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, free_orders[round]))) << round;
    EXPECT_FALSE(registered(e, kB));
    counts_are(1);
  }
  // A copy's dup, in the same order (its plan is its original's), and the frees of both.
  ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, newest_first, 1)));
  ASSERT_TRUE(dup_ran(e, kB, kC, copy_runs(e, kB, newest_first, 1)));
  copy_holds(kC, 2, 0);
  counts_are(3);
  ASSERT_TRUE(free_ran(e, kC, delete_runs(e, kC, keys)));
  ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, newest_first)));
  counts_are(1);
  // The runs in another order: the general way, whose order the next dups then follow; and back.
  for (const auto& order : {keys, keys, neither, newest_first, newest_first}) {
    ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, order, 5)));
    copy_holds(kB, 5, 0);
    ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, reversed(order))));
    counts_are(1);
  }
  // kA itself freed through its plan (MPICH: its deletes in its copies' order).
  ASSERT_TRUE(free_ran(e, kA, delete_runs(e, kA, newest_first)));
  counts_are(0);
  EXPECT_TRUE(log.copied_in.empty());
  EXPECT_TRUE(log.deleted.empty());
}

// Runs a plan cannot follow, or that are not the plain case, after a plan was made (and kept by
// the dups between): a dup or free the general way, or refused with nothing changed, exactly as
// without a plan.
TEST(EngineRunPlan, FallsBackOnAnyMismatch) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  std::vector<KeyvalId> keys;
  for (int i = 0; i < 5; ++i) {
    keys.push_back(make_key(e, &log));
    ASSERT_TRUE(e.set_attr(kComm, kA, keys.back(), Binding::C, 20 + i).ok());
  }
  const std::vector<KeyvalId> order = reversed(keys);
  auto counts_are = [&](std::uint32_t n) {
    for (const KeyvalId k : keys) EXPECT_EQ(attributes_of(e, k), n);
  };
  auto dup_free = [&] {
    ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, order)));
    ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, order)));
  };
  dup_free();
  dup_free();  // (through the plan)
  const std::vector<RanCopy> good = copy_runs(e, kA, order);
  std::vector<std::vector<RanCopy>> bad(6, good);
  bad[0][2].value_in = 99;  // a value the attribute does not hold
  bad[1][3].rc = 5;         // a failed callback
  bad[2][1].flag = 2;       // a flag that is neither 0 nor 1
  bad[3].pop_back();        // a callback missing
  bad[4].push_back(good[0]);  // one run twice
  bad[5][4].keyval = keys[0] + 1000;  // a callback for a keyval the object does not hold
  for (std::size_t i = 0; i < bad.size(); ++i) {
    EXPECT_FALSE(dup_ran(e, kA, kB, bad[i])) << i;
    EXPECT_FALSE(registered(e, kB)) << i;
    counts_are(1);
  }
  dup_free();
  // A dup in another order that stops half way (one value wrong) leaves no plan: a plan half
  // written over would take a run twice and miss another (which the general way refuses).
  for (std::size_t wrong = 0; wrong < good.size(); ++wrong) {
    std::vector<RanCopy> other(good.rbegin(), good.rend());
    other[wrong].value_in = 99;
    EXPECT_FALSE(dup_ran(e, kA, kB, other)) << wrong;
    for (std::size_t i = 0; i < good.size(); ++i)
      for (std::size_t j = 0; j < good.size(); ++j) {
        if (i == j) continue;
        std::vector<RanCopy> twice = good;
        twice[i] = good[j];
        EXPECT_FALSE(dup_ran(e, kA, kB, twice)) << wrong << " " << i << " " << j;
      }
    EXPECT_FALSE(registered(e, kB));
    dup_free();
    dup_free();
  }
  // Flag 0: that attribute not copied, the rest are.
  std::vector<RanCopy> declined = good;
  declined[2].flag = 0;
  ASSERT_TRUE(dup_ran(e, kA, kB, declined));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    int flag;
    value_of(e, kB, keys[i], &flag);
    EXPECT_EQ(flag, keys[i] == order[2] ? 0 : 1) << i;
  }
  std::vector<KeyvalId> held = order;
  held.erase(held.begin() + 2);
  ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, held)));
  counts_are(1);
  // A record changed since the plan was made: a run with its old value is not the call due.
  dup_free();
  ASSERT_TRUE(e.set_attr(kComm, kA, keys[1], Binding::C, 77).ok());  // (keys[1] now newest)
  EXPECT_FALSE(dup_ran(e, kA, kB, good));
  EXPECT_FALSE(registered(e, kB));
  std::vector<KeyvalId> now = {keys[1], keys[4], keys[3], keys[2], keys[0]};
  ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, now)));
  int flag;
  EXPECT_EQ(value_of(e, kB, keys[1], &flag), 77u);
  ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, now)));
  // A value set from Fortran since: only the host knows what a C callback was given for it.
  ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, now)));
  ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, now)));
  std::vector<RanCopy> as_before = copy_runs(e, kA, now);  // (keys[1]'s run given 77, as before)
  ASSERT_TRUE(e.set_attr(kComm, kA, keys[1], Binding::FortranInt, 77).ok());
  EXPECT_FALSE(dup_ran(e, kA, kB, as_before));
  EXPECT_FALSE(dup_ran(e, kA, kB, copy_runs(e, kA, now)));
  EXPECT_FALSE(registered(e, kB));
  ASSERT_TRUE(e.set_attr(kComm, kA, keys[1], Binding::C, 77).ok());
  ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, now)));
  ASSERT_TRUE(dup_ran(e, kA, kC, copy_runs(e, kA, now)));  // (through the plan)
  // Frees the copy's plan cannot take: each refused with nothing changed.
  const std::vector<RanDelete> good_del = delete_runs(e, kB, now);
  std::vector<std::vector<RanDelete>> bad_del(6, good_del);
  bad_del[0][0].value = 99;     // not the value the copy holds
  bad_del[1][4].rc = 1;         // a failed callback
  bad_del[2][2].object = kC;    // run for another object
  bad_del[3].pop_back();        // a callback missing
  bad_del[4].push_back(good_del[0]);  // one run twice
  bad_del[5][3].keyval = keys[0] + 1000;
  for (std::size_t i = 0; i < bad_del.size(); ++i) {
    EXPECT_FALSE(free_ran(e, kB, bad_del[i])) << i;
    EXPECT_TRUE(registered(e, kB)) << i;
    counts_are(3);
  }
  ASSERT_TRUE(free_ran(e, kB, good_del));
  ASSERT_TRUE(free_ran(e, kC, delete_runs(e, kC, reversed(now))));
  counts_are(1);
  // Two attributes with the same value, their runs swapped since the plan was made: each copy
  // holds what its own run gave.
  ASSERT_TRUE(e.create_object(kComm, kD).ok());
  for (const KeyvalId k : {keys[0], keys[1]}) ASSERT_TRUE(e.set_attr(kComm, kD, k, Binding::C, 7).ok());
  const std::vector<RanCopy> first = {RanCopy{keys[1], 0, 1, 7, 100}, RanCopy{keys[0], 0, 1, 7, 200}};
  const std::vector<RanCopy> swapped = {RanCopy{keys[0], 0, 1, 7, 200}, RanCopy{keys[1], 0, 1, 7, 100}};
  for (const auto* runs : {&first, &first, &swapped, &first}) {
    ASSERT_TRUE(dup_ran(e, kD, kB, *runs));
    EXPECT_EQ(value_of(e, kB, keys[0], &flag), 200u);
    EXPECT_EQ(value_of(e, kB, keys[1], &flag), 100u);
    ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, {keys[1], keys[0]})));
  }
  ASSERT_TRUE(free_ran(e, kD, delete_runs(e, kD, {keys[1], keys[0]})));
  counts_are(1);
  EXPECT_TRUE(log.copied_in.empty());  // (the deletes logged are the sets' on kA)
}

// A run plan with attributes copied as they are (MPI_COMM_DUP_FN, a predefined attribute) after
// its runs, and a keyval the user freed meanwhile; and keyvals whose copy and delete functions
// differ (a run for a delete function the keyval does not have, a delete function whose run is
// missing): refused, as the general way refuses them.
TEST(EngineRunPlan, WithAttributesCopiedAsTheyAreAndAFreedKeyval) {
  Log log;
  Engine e;
  ASSERT_TRUE(e.register_predefined_keyval(kComm, 1, "COPIED", true).ok());
  ASSERT_TRUE(e.create_object(kComm, kA).ok());
  ASSERT_TRUE(e.install_predefined(kComm, kA, 1, Binding::C, 0xBA5E).ok());
  std::vector<KeyvalId> user;
  const KeyvalId as_is = make_key(e, &log, CopyAction::Dup, DeleteAction::NullDelete);
  ASSERT_TRUE(e.set_attr(kComm, kA, as_is, Binding::C, 5).ok());
  for (int i = 0; i < 3; ++i) {
    user.push_back(make_key(e, &log));
    ASSERT_TRUE(e.set_attr(kComm, kA, user.back(), Binding::C, 30 + i).ok());
  }
  const std::vector<KeyvalId> order = reversed(user);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, order, 100))) << round;
    for (std::size_t i = 0; i < user.size(); ++i) {
      int flag;
      EXPECT_EQ(value_of(e, kB, user[i], &flag), 130 + i);
    }
    int flag;
    EXPECT_EQ(value_of(e, kB, as_is, &flag), 5u);
    EXPECT_EQ(value_of(e, kB, 1, &flag), 0xBA5Eu);
    EXPECT_EQ(attributes_of(e, as_is), 2u);
    ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, round == 1 ? user : order))) << round;
    EXPECT_EQ(attributes_of(e, as_is), 1u);
  }
  // user[1] freed by the user while kA, then kB and kC, hold it: it goes with the last of them.
  ASSERT_TRUE(dup_ran(e, kA, kB, copy_runs(e, kA, order)));
  KeyvalId freed = user[1];
  ASSERT_TRUE(e.free_keyval(kComm, &freed).ok());
  ASSERT_TRUE(dup_ran(e, kA, kC, copy_runs(e, kA, order)));
  KeyvalInfo info;
  ASSERT_TRUE(e.keyval_info(user[1], &info));
  EXPECT_EQ(info.attributes, 3u);
  ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, order)));
  ASSERT_TRUE(free_ran(e, kC, delete_runs(e, kC, user)));
  ASSERT_TRUE(e.keyval_info(user[1], &info));
  EXPECT_FALSE(info.destroyed);
  EXPECT_EQ(info.attributes, 1u);
  ASSERT_TRUE(free_ran(e, kA, delete_runs(e, kA, order)));
  EXPECT_TRUE(!e.keyval_info(user[1], &info) || info.destroyed);
  EXPECT_EQ(attributes_of(e, as_is), 0u);

  // A keyval with a copy function and no delete function, and one the other way round.
  const KeyvalId u = make_key(e, &log);
  const KeyvalId copy_only = make_key(e, &log, CopyAction::User, DeleteAction::NullDelete);
  const KeyvalId delete_only = make_key(e, &log, CopyAction::Dup, DeleteAction::User);
  ASSERT_TRUE(e.create_object(kComm, kD).ok());
  for (const KeyvalId k : {u, copy_only}) ASSERT_TRUE(e.set_attr(kComm, kD, k, Binding::C, 50).ok());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(dup_ran(e, kD, kB, copy_runs(e, kD, {copy_only, u})));
    EXPECT_FALSE(free_ran(e, kB, delete_runs(e, kB, {copy_only, u})));  // copy_only has no delete function
    EXPECT_FALSE(free_ran(e, kB, delete_runs(e, kB, {u, copy_only})));
    ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, {u})));
  }
  ASSERT_TRUE(e.delete_attr(kComm, kD, copy_only).ok());
  ASSERT_TRUE(e.set_attr(kComm, kD, delete_only, Binding::C, 51).ok());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(dup_ran(e, kD, kB, copy_runs(e, kD, {u})));
    EXPECT_FALSE(free_ran(e, kB, delete_runs(e, kB, {u})));  // delete_only's did not run
    ASSERT_TRUE(free_ran(e, kB, delete_runs(e, kB, round ? std::vector<KeyvalId>{u, delete_only}
                                                          : std::vector<KeyvalId>{delete_only, u})));
  }
  EXPECT_EQ(attributes_of(e, u), 1u);
  EXPECT_EQ(attributes_of(e, delete_only), 1u);
  EXPECT_TRUE(log.copied_in.empty());
  EXPECT_TRUE(log.deleted.empty());
}

}  // namespace
