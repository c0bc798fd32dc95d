// engine_reentrance_test: callbacks that call the engine (PETSc's inner / outer communicators,
// changes to the object being copied or freed), throwing callbacks, and the observer's events.
#include "engine_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_fixtures;

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

}  // namespace
