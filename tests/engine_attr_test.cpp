// engine_attr_test: set / get / delete of attributes, the versions the query cache memoises,
// error classes and strings, and the size of an attribute (docs/engine.md).
#include "engine_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_fixtures;

// ---- Attributes ----------------------------------------------------------------------------

TEST(Attr, SetThenGetReturnsTheValue) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec(kType));
  ASSERT_EQ(e.create_object(kType, kA, kObjectNone, /*origin=*/3), kOk);
  ASSERT_EQ(e.set_attr(kType, kA, k, Binding::C, 0x1234, /*origin=*/7), kOk);
  void* v = nullptr;
  int flag = 0;
  ASSERT_EQ(e.get_attr(kType, kA, k, Binding::C, &v, &flag), kOk);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(W(v), 0x1234u);
  std::vector<AttributeInfo> all = e.attributes();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, kType);
  EXPECT_EQ(all[0].object, kA);
  EXPECT_EQ(all[0].keyval, k);
  EXPECT_EQ(all[0].repr, Binding::C);
  EXPECT_EQ(all[0].value, 0x1234u);
  EXPECT_EQ(all[0].set_at, 7u);
  EXPECT_EQ(all[0].object_created_at, 3u);
  EXPECT_FALSE(all[0].predefined);
}

TEST(Attr, GetOfUnsetGivesFlagZeroAndLeavesOutputUntouched) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  void* v = reinterpret_cast<void*>(0x5555);
  std::int64_t aint = 66;
  std::int32_t fint = 77;
  int f1 = 1, f2 = 1, f3 = 1;
  ASSERT_EQ(e.get_attr(kComm, kA, k, Binding::C, &v, &f1), kOk);
  ASSERT_EQ(e.get_attr(kComm, kA, k, Binding::FortranAint, &aint, &f2), kOk);
  ASSERT_EQ(e.get_attr(kComm, kA, k, Binding::FortranInt, &fint, &f3), kOk);
  EXPECT_EQ(f1 + f2 + f3, 0);
  EXPECT_EQ(W(v), 0x5555u);
  EXPECT_EQ(aint, 66);
  EXPECT_EQ(fint, 77);
}

TEST(Attr, ReplaceRunsDeleteOnOldValueAndNewValueBecomesNewest) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {k2, 2}});
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k1, k2}));
  ASSERT_EQ(e.set_attr(kComm, kA, k1, Binding::C, 3), kOk);
  EXPECT_EQ(log, (Log{{'D', "k1", kA, k1, 1}}));
  ASSERT_EQ(w.obs.events.size(), 1u);
  expect_event(w.obs.events[0], CallbackCause::Set, kComm, kA, k1);
  EXPECT_EQ(get_c(e, kComm, kA, k1), 3u);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k2, k1}));
  std::vector<AttributeInfo> attrs = e.attributes(kComm, kA);
  EXPECT_GT(attrs[1].order, attrs[0].order);
}

TEST(Attr, FailingDeleteOnReplaceKeepsOldValueAndReturnsCallbackRc) {
  Engine e;
  Log log;
  Rec r1(&log, "k1"), r2(&log, "k2");
  KeyvalId k1 = make_key(e, user_spec(&r1)), k2 = make_key(e, user_spec(&r2));
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{k1, 1}, {k2, 2}});
  r1.del_rc = 42;
  EXPECT_EQ(e.set_attr(kComm, kA, k1, Binding::FortranAint, 3), R(Status::CallbackFailed, 42));
  EXPECT_EQ(log, (Log{{'D', "k1", kA, k1, 1}}));
  EXPECT_EQ(get_c(e, kComm, kA, k1), 1u);
  EXPECT_EQ(keys_of(e, kComm, kA), (Keys{k1, k2}));  // order unchanged
  EXPECT_EQ(e.attributes(kComm, kA)[0].repr, Binding::C);
}

TEST(Attr, DeleteRunsTheDeleteCallback) {
  Watched w;
  Engine& e = w.e;
  Log log;
  Rec r(&log, "k");
  KeyvalId k = make_key(e, user_spec(&r, kWin));
  create(e, kWin, {kA});
  ASSERT_EQ(e.set_attr(kWin, kA, k, Binding::C, 99), kOk);
  ASSERT_EQ(e.delete_attr(kWin, kA, k), kOk);
  EXPECT_EQ(log, (Log{{'D', "k", kA, k, 99}}));
  ASSERT_EQ(w.obs.events.size(), 1u);
  expect_event(w.obs.events[0], CallbackCause::Delete, kWin, kA, k);
  EXPECT_FALSE(has_attr(e, kWin, kA, k));
  KeyvalInfo info = info_of(e, k);
  EXPECT_EQ(info.attributes, 0u);
}

TEST(Attr, FailingDeleteKeepsTheAttribute) {
  Engine e;
  Rec r;
  r.del_rc = 13;
  KeyvalId k = make_key(e, user_spec(&r));
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 99), kOk);
  EXPECT_EQ(e.delete_attr(kComm, kA, k), R(Status::CallbackFailed, 13));
  EXPECT_EQ(r.deletes, 1);
  EXPECT_EQ(get_c(e, kComm, kA, k), 99u);
  r.del_rc = 0;
  EXPECT_EQ(e.delete_attr(kComm, kA, k), kOk);
  EXPECT_FALSE(has_attr(e, kComm, kA, k));
}

TEST(Attr, DeleteOfAbsentIsAttrAbsent) {
  Engine e;
  Rec r;
  KeyvalId k = make_key(e, user_spec(&r));
  create(e, kComm, {kA});
  EXPECT_EQ(e.delete_attr(kComm, kA, k), R(Status::AttrAbsent));
  EXPECT_EQ(r.deletes, 0);
}

TEST(Attr, GetRejectsNullOutputs) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  void* v = nullptr;
  int flag = 0;
  EXPECT_EQ(e.get_attr(kComm, kA, k, Binding::C, nullptr, &flag), R(Status::NullArgument));
  EXPECT_EQ(e.get_attr(kComm, kA, k, Binding::C, &v, nullptr), R(Status::NullArgument));
  // NullArgument is checked before the object and the keyval.
  EXPECT_EQ(e.get_attr(kComm, kNever, -1, Binding::C, &v, nullptr), R(Status::NullArgument));
}

TEST(Attr, NullAndUnknownObjectsAreRejected) {
  EngineConfig cfg;
  cfg.null_handle[0] = 0xC0;
  cfg.null_handle[1] = 0xD0;
  cfg.null_handle[2] = 0xE0;
  Engine e(cfg);
  for (ObjectKind kind : {kComm, kType, kWin}) {
    SCOPED_TRACE(to_string(kind));
    const Handle null = cfg.null_handle[static_cast<int>(kind)];
    KeyvalId k = make_key(e, plain_spec(kind));
    EXPECT_EQ(e.create_object(kind, null), R(Status::ObjectNull));
    EXPECT_EQ(e.set_attr(kind, null, k, Binding::C, 1), R(Status::ObjectNull));
    EXPECT_EQ(try_get(e, kind, null, k), R(Status::ObjectNull));
    EXPECT_EQ(e.delete_attr(kind, null, k), R(Status::ObjectNull));
    EXPECT_EQ(e.free_object(kind, null), R(Status::ObjectNull));
    EXPECT_EQ(e.set_attr(kind, kNever, k, Binding::C, 1), R(Status::ObjectUnknown));
    EXPECT_EQ(try_get(e, kind, kNever, k), R(Status::ObjectUnknown));
    EXPECT_EQ(e.delete_attr(kind, kNever, k), R(Status::ObjectUnknown));
    EXPECT_EQ(e.free_object(kind, kNever), R(Status::ObjectUnknown));
    // The object is checked before the keyval.
    EXPECT_EQ(e.set_attr(kind, kNever, -1, Binding::C, 1), R(Status::ObjectUnknown));
    EXPECT_EQ(e.set_attr(kind, null, -1, Binding::C, 1), R(Status::ObjectNull));
  }
  EXPECT_EQ(e.create_object(kComm, 0), kOk);  // 0 is ordinary when it is not the configured null
  EXPECT_EQ(e.create_object(kComm, 0), R(Status::ObjectExists));
  create(e, kComm, {kA});
  EXPECT_EQ(e.free_object(kType, kA), R(Status::ObjectUnknown));  // handles are per kind
}

TEST(Attr, FreedObjectIsUnknown) {
  Engine e;
  KeyvalId k = make_key(e, plain_spec());
  create(e, kComm, {kA});
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), kOk);
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_EQ(e.set_attr(kComm, kA, k, Binding::C, 1), R(Status::ObjectUnknown));
  EXPECT_EQ(try_get(e, kComm, kA, k), R(Status::ObjectUnknown));
  EXPECT_EQ(e.delete_attr(kComm, kA, k), R(Status::ObjectUnknown));
  EXPECT_EQ(e.free_object(kComm, kA), R(Status::ObjectUnknown));
  EXPECT_TRUE(e.attributes().empty());
  ASSERT_EQ(e.create_object(kComm, kA), kOk);  // the handle may be reused; it starts empty
  EXPECT_FALSE(has_attr(e, kComm, kA, k));
}

// ---- Errors, strings, size -----------------------------------------------------------------

TEST(Errors, ErrorClassOfEveryStatus) {
  using S = Status;
  using E = ErrorClass;
  const ErrorClass object_class[] = {E::Comm, E::Type, E::Win};
  for (int i = 0; i < kObjectKinds; ++i) {
    const ObjectKind kind = static_cast<ObjectKind>(i);
    SCOPED_TRACE(to_string(kind));
    EXPECT_EQ(error_class(S::Ok, kind), E::Success);
    for (S s : {S::KeyvalInvalid, S::KeyvalUnknown, S::KeyvalFreed, S::KeyvalDoubleFree, S::KeyvalKindMismatch,
                S::KeyvalPredefined})
      EXPECT_EQ(error_class(s, kind), E::Keyval) << to_string(s);
    for (S s : {S::ObjectNull, S::ObjectUnknown, S::ObjectExists, S::ObjectPredefined})
      EXPECT_EQ(error_class(s, kind), object_class[i]) << to_string(s);
    EXPECT_EQ(error_class(S::NullArgument, kind), E::Arg);
    EXPECT_EQ(error_class(S::CallbackFailed, kind), E::Callback);
    EXPECT_EQ(error_class(S::CallbackThrew, kind), E::Callback);
    for (S s : {S::Reentrant, S::Finalized, S::CapacityExhausted})
      EXPECT_EQ(error_class(s, kind), E::Other) << to_string(s);
    EXPECT_EQ(error_class(S::AttrAbsent, kind), E::Success);
  }
}

TEST(Errors, ToStringIsNonNullAndDistinct) {
  std::set<std::string> seen;
  const int n = static_cast<int>(Status::CapacityExhausted) + 1;
  for (int i = 0; i < n; ++i) {
    const char* s = to_string(static_cast<Status>(i));
    ASSERT_NE(s, nullptr) << i;
    EXPECT_GT(std::strlen(s), 0u) << i;
    EXPECT_TRUE(seen.insert(s).second) << "duplicate: " << s;
  }
  EXPECT_EQ(seen.size(), 18u);
  for (int i = 0; i < 6; ++i) EXPECT_NE(to_string(static_cast<CallbackCause>(i)), nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_NE(to_string(static_cast<Binding>(i)), nullptr);
  for (int i = 0; i < 8; ++i) EXPECT_NE(to_string(static_cast<ErrorClass>(i)), nullptr);
}

TEST(Size, AttributeBytesPerAttributeAtMost64) {
  Engine e;
  create(e, kComm, {kA});
  const std::size_t empty = e.attribute_bytes();
  for (int i = 0; i < 64; ++i) set_all(e, kComm, kA, {{make_key(e, plain_spec()), i + 1u}});
  ASSERT_EQ(e.attributes(kComm, kA).size(), 64u);
  const std::size_t bytes = e.attribute_bytes();
  EXPECT_GT(bytes, empty);  // it does count the attributes
  EXPECT_LE(bytes / 64, 64u) << bytes << " bytes for 64 attributes";
}

// The versions a caller memoises get answers by (the runtime's query cache): layout_version()
// moves only when a query's validity can change, version() whenever an answer can.
TEST(Versions, LayoutMovesWithKeyvalsAndObjectsNotWithAttributes) {
  Engine e;
  const std::uint64_t l0 = e.layout_version();
  EXPECT_NE(l0, 0u);
  KeyvalId k = make_key(e, plain_spec());
  const std::uint64_t l1 = e.layout_version();
  EXPECT_GT(l1, l0);
  create(e, kComm, {kA});
  const std::uint64_t l2 = e.layout_version();
  EXPECT_GT(l2, l1);
  const std::uint64_t v0 = e.version();
  ASSERT_EQ(e.set_attr(kComm, kA, k, Binding::C, 10), kOk);
  const std::uint64_t v1 = e.version();
  EXPECT_GT(v1, v0);
  EXPECT_EQ(v1 % 2, 0u);
  EXPECT_EQ(get_c(e, kComm, kA, k), 10u);
  EXPECT_EQ(e.version(), v1);  // reading changes nothing
  ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
  EXPECT_GT(e.version(), v1);
  EXPECT_EQ(e.layout_version(), l2);  // set and delete leave validity alone
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);
  const std::uint64_t l3 = e.layout_version();
  EXPECT_GT(l3, l2);
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  EXPECT_GT(e.layout_version(), l3);
  const std::uint64_t l4 = e.layout_version();
  e.finalize();
  EXPECT_GT(e.layout_version(), l4);
}

// Rollback delete callbacks run for the new object: the old one, whose copying is over, may be

}  // namespace
