// engine_keyval_test: keyval create / free, stale and freed keys, kinds, predefined keyvals,
// kept slots and capacity (docs/engine.md, one focused test per rule).
#include "engine_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_fixtures;

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

TEST(Keyval, SetCheckedWhenEnteredTakesTheKeyvalItsOwnCallbackFreed) {
  // A mirrored set whose checks were made when the call began (set_attr_entered): the replaced
  // value's delete callback freed the keyval in the middle of the call, which is legal (the key
  // is in use). The set completes as the library completed it, and the key lives on through the
  // attribute; the same key with no attribute to replace is still refused, as is a plain set.
  for (ObjectKind kind : {kComm, kType, kWin}) {
    SCOPED_TRACE(static_cast<int>(kind));
    Engine e;
    Log log;
    Rec r{&log, "k"};
    KeyvalId k = make_key(e, user_spec(&r, kind));
    const KeyvalId saved = k;
    r.on_del = [&](Handle, KeyvalId, std::uint64_t) {
      EXPECT_EQ(e.free_keyval(kind, &k), kOk);
      return 0;
    };
    create(e, kind, {kA, kB});
    ASSERT_EQ(e.set_attr(kind, kA, saved, Binding::C, 1), kOk);
    EXPECT_EQ(e.set_attr_entered(kind, kA, saved, Binding::C, 6), kOk);
    EXPECT_EQ(log, (Log{{'D', "k", kA, saved, 1}}));
    EXPECT_EQ(std::make_tuple(info_of(e, saved).user_freed, info_of(e, saved).destroyed), std::make_tuple(true, false));
    r.on_del = nullptr;
    EXPECT_EQ(e.set_attr_entered(kind, kB, saved, Binding::C, 2), R(Status::KeyvalFreed));  // nothing to replace
    EXPECT_EQ(e.set_attr(kind, kA, saved, Binding::C, 7), R(Status::KeyvalFreed));          // a new call
    EXPECT_EQ(e.delete_attr(kind, kA, saved), kOk);  // the value the set left, and the key goes with it
    EXPECT_EQ(log, (Log{{'D', "k", kA, saved, 1}, {'D', "k", kA, saved, 6}}));
    EXPECT_TRUE(info_of(e, saved).destroyed);
    EXPECT_EQ(e.set_attr_entered(kind, kA, saved, Binding::C, 8), R(Status::KeyvalFreed));
  }
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

}  // namespace
