// engine_objects_test: dup (copy callbacks, the copy flag, rollback), free (delete callbacks,
// newest first) and finalize (MPI_COMM_SELF / MPI_COMM_WORLD attributes, leaked keyvals).
#include "engine_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_fixtures;

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

}  // namespace
