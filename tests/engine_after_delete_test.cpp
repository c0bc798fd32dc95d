// engine_after_delete_test: what emulate mode's query cache uses when it runs a delete callback
// itself (src/runtime/hooks/cache_callbacks.hpp, change_from_cache: a replacing set, a cancelled
// pair): c_delete_function (which function to run) and set_attr_after_delete (the set that follows
// once the callback ran, even where the callback moved the layout, e.g. by freeing its own keyval).
#include "engine_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_fixtures;

SetCursor cursor_for(const Engine& e, ObjectKind kind, Handle h, KeyvalId k) {
  SetCursor c;
  EXPECT_TRUE(e.find_set_cursor(kind, h, k, e.layout_version(), &c)) << k;
  return c;
}

TEST(CDeleteFunction, NamesAUserCFunctionOnly) {
  Engine e;
  Rec r(nullptr, "k");
  const KeyvalId user = make_key(e, user_spec(&r)), plain = make_key(e, plain_spec());
  KeyvalSpec fortran = user_spec(&r);
  fortran.lang = Binding::FortranAint;
  const KeyvalId f = make_key(e, fortran);
  create(e, kComm, {kA});
  void* fn = nullptr;
  std::uint64_t extra = 0;
  ASSERT_TRUE(e.c_delete_function(cursor_for(e, kComm, kA, user), &fn, &extra));
  EXPECT_EQ(fn, del_fn());
  EXPECT_EQ(extra, W(&r));
  EXPECT_FALSE(e.c_delete_function(cursor_for(e, kComm, kA, plain), &fn, &extra));
  EXPECT_FALSE(e.c_delete_function(cursor_for(e, kComm, kA, f), &fn, &extra));
  EXPECT_FALSE(e.c_delete_function(SetCursor{}, &fn, &extra));
}

// The replaced value's callback ran (outside the engine) and freed the keyval: the layout moved,
// so set_attr_ran refuses the cursor, but the set still goes through (the attribute holds its
// keyval), and calls nothing.
TEST(SetAttrAfterDelete, SetsAfterTheCallbackFreedTheKeyval) {
  Engine e;
  Log log;
  Rec r(&log, "k");
  KeyvalId k = make_key(e, user_spec(&r));
  const KeyvalId id = k;
  create(e, kComm, {kA});
  set_all(e, kComm, kA, {{id, 1}});
  const SetCursor c = cursor_for(e, kComm, kA, id);
  ASSERT_EQ(e.free_keyval(kComm, &k), kOk);  // inside the callback
  const RanDelete ran{kA, id, 1, 0};
  EXPECT_FALSE(e.set_attr_ran(c, Binding::C, 2, 0, &ran));
  std::uint64_t version = 0;
  ASSERT_TRUE(e.set_attr_after_delete(c, Binding::C, 2, 9, ran, &version));
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(version, e.version());
  const std::vector<AttributeInfo> attrs = e.attributes(kComm, kA);
  ASSERT_EQ(attrs.size(), 1u);
  EXPECT_EQ(attrs[0].value, 2u);
  EXPECT_EQ(attrs[0].set_at, 9u);
  // The free runs the new value's callback, which then releases the keyval.
  ASSERT_EQ(e.free_object(kComm, kA), kOk);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].value, 2u);
}

// Anything but the attribute the callback ran for, with the value it was passed, changes nothing.
TEST(SetAttrAfterDelete, RefusesAnythingButTheValueTheCallbackGot) {
  Engine e;
  Log log;
  Rec r(&log, "k");
  const KeyvalId k = make_key(e, user_spec(&r)), other = make_key(e, user_spec(&r));
  create(e, kComm, {kA, kB});
  set_all(e, kComm, kA, {{k, 1}});
  const SetCursor c = cursor_for(e, kComm, kA, k);
  const std::uint64_t before = e.version();
  EXPECT_FALSE(e.set_attr_after_delete(c, Binding::C, 2, 0, RanDelete{kA, k, 7, 0}));    // another value
  EXPECT_FALSE(e.set_attr_after_delete(c, Binding::C, 2, 0, RanDelete{kB, k, 1, 0}));    // another object
  EXPECT_FALSE(e.set_attr_after_delete(c, Binding::C, 2, 0, RanDelete{kA, other, 1, 0}));  // another keyval
  EXPECT_FALSE(e.set_attr_after_delete(c, Binding::C, 2, 0, RanDelete{kA, k, 1, 5}));    // it failed
  EXPECT_EQ(e.version(), before);
  // Gone meanwhile: nothing to replace.
  ASSERT_EQ(e.delete_attr(kComm, kA, k), kOk);
  create(e, kComm, {kC});  // (the layout moves)
  EXPECT_FALSE(e.set_attr_after_delete(c, Binding::C, 2, 0, RanDelete{kA, k, 1, 0}));
  EXPECT_FALSE(has_attr(e, kComm, kA, k));
}

}  // namespace
