// engine_cursor_test: the runtime's quick ways through a cursor: set_attr_ran / delete_attr_ran
// (shadow mode mirrors a set or delete whose callback ran in the library) and set_attr_at /
// delete_attr_at (emulate mode sets and deletes through a cursor).
#include "engine_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_fixtures;

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

}  // namespace
