// The runtime's per-thread query cache (src/runtime/fast/query_cache.hpp), without MPI: what it finds,
// what it forgets, and that an answer is only believed at the version it was read at.
#include "runtime/fast/query_cache.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <memory>

namespace {

using attrcheck::Binding;
using attrcheck::Handle;
using attrcheck::ObjectKind;
using attrcheck::rt::QueryCache;

constexpr ObjectKind kComm = ObjectKind::Comm;
constexpr Handle kA = 0x7f0000001000, kB = 0x7f0000002000;

TEST(QueryCache, FindsWhatWasRememberedAtTheSameLayoutOnly) {
  auto cache = std::make_unique<QueryCache>();
  EXPECT_EQ(cache->lookup(kComm, Binding::C, kA, 10), nullptr);  // empty: nothing matches
  QueryCache::Entry& e = cache->remember(kComm, Binding::C, kA, 10, 65546, 7);
  EXPECT_EQ(e.engine_key, 65546);
  EXPECT_EQ(e.key(), 10);
  EXPECT_EQ(e.kind(), kComm);
  EXPECT_EQ(e.binding(), Binding::C);
  EXPECT_EQ(cache->find(kComm, Binding::C, kA, 10, 7), &e);
  EXPECT_EQ(cache->find(kComm, Binding::C, kA, 10, 8), nullptr);  // a keyval or object came or went
  EXPECT_EQ(cache->lookup(kComm, Binding::C, kA, 10), &e);
  // Any other object, keyval, kind or binding is another query.
  EXPECT_EQ(cache->find(kComm, Binding::C, kB, 10, 7), nullptr);
  EXPECT_EQ(cache->find(kComm, Binding::C, kA, 11, 7), nullptr);
  EXPECT_EQ(cache->find(ObjectKind::Type, Binding::C, kA, 10, 7), nullptr);
  EXPECT_EQ(cache->find(kComm, Binding::FortranInt, kA, 10, 7), nullptr);
  EXPECT_EQ(cache->find(kComm, Binding::C, kA, -10, 7), nullptr);
}

TEST(QueryCache, AnAnswerHoldsAtItsVersionOnly) {
  auto cache = std::make_unique<QueryCache>();
  QueryCache::Entry& e = cache->remember(kComm, Binding::C, kA, 10, 1, 7);
  EXPECT_FALSE(QueryCache::has_answer(e, 0));  // remembered without an answer
  EXPECT_FALSE(QueryCache::has_answer(e, 1));  // not even against an odd version read mid-change
  QueryCache::remember_answer(e, 40, 0x1234, 1);
  EXPECT_TRUE(QueryCache::has_answer(e, 40));
  EXPECT_FALSE(QueryCache::has_answer(e, 42));
  EXPECT_EQ(e.word, 0x1234u);
  EXPECT_EQ(e.flag, 1);
  QueryCache::remember_answer(e, 43, 0x9999, 0);  // read while a change was under way: not kept
  EXPECT_TRUE(QueryCache::has_answer(e, 40));
  EXPECT_EQ(e.word, 0x1234u);
  QueryCache::remember_answer(e, 44, 0, 5);  // flags are kept as 0 / 1
  EXPECT_EQ(e.flag, 1);
  // Remembering the query again (checked anew) drops the answer.
  cache->remember(kComm, Binding::C, kA, 10, 1, 9);
  EXPECT_FALSE(QueryCache::has_answer(*cache->lookup(kComm, Binding::C, kA, 10), 44));
}

TEST(QueryCache, ManyQueriesEvictOnlyWithinASetAndNeverConfuseQueries) {
  auto cache = std::make_unique<QueryCache>();
  // 64 keyvals on 8 objects: more than some sets hold, so some are evicted; every query still
  // found maps to its own engine keyval.
  for (int k = 0; k < 64; ++k)
    for (Handle h = 0; h < 8; ++h) cache->remember(kComm, Binding::C, kA + h * 0x400, k, k * 100 + int(h), 3);
  int found = 0;
  for (int k = 0; k < 64; ++k)
    for (Handle h = 0; h < 8; ++h)
      if (const QueryCache::Entry* e = cache->find(kComm, Binding::C, kA + h * 0x400, k, 3)) {
        ++found;
        EXPECT_EQ(e->engine_key, k * 100 + int(h));
        EXPECT_EQ(e->object, kA + h * 0x400);
      }
  EXPECT_GT(found, 300);  // 512 queries in 512 entries: most stay
  // The newest query of a set is always found.
  cache->remember(kComm, Binding::C, kB, 5, 77, 3);
  ASSERT_NE(cache->find(kComm, Binding::C, kB, 5, 3), nullptr);
  EXPECT_EQ(cache->find(kComm, Binding::C, kB, 5, 3)->engine_key, 77);
}

TEST(QueryCache, AnObjectsConsecutiveKeyvalsAllStayWhereverTheObjectIs) {
  // The set index adds the keyval's multiple to the handle (query_cache.hpp, set_of): 64
  // consecutive keyvals on one object never put three queries in one set, whatever the handle
  // (pointers as Open MPI's, integers as MPICH's), so a program cycling through them always hits,
  // in every run alike.
  for (const Handle base : {Handle{0x7f0000001000}, Handle{0x5555deadbee0}, Handle{0x84000002}, Handle{0x44000000}})
    for (Handle step = 0; step < 64; ++step) {
      auto cache = std::make_unique<QueryCache>();
      const Handle h = base + step * 0x1d8;
      for (const int first : {1, 7, 0x24400000})
        for (int k = first; k < first + 64; ++k) cache->remember(kComm, Binding::C, h, k, k, 3);
      for (int k = 0x24400000; k < 0x24400000 + 64; ++k)
        ASSERT_NE(cache->find(kComm, Binding::C, h, k, 3), nullptr) << std::hex << h << " " << k;
    }
}

}  // namespace

// A set deferred in one binding changes what the other bindings of the same object and keyval
// read: their answers go, and a refresh can tell that the engine lacks the pending value.
// A C communicator's query tag is its keyval alone, so an empty entry (all zeros) is the query
// (handle 0, C, communicator, keyval 0). It must never pass for a remembered one: no answer at any
// version the engine has once MPI runs (they are past 0), no layout stamp (the engine's start at
// 1), no cursor, nothing pending; and it is no other binding's entry of any query.
TEST(QueryCache, AnEmptyEntryAnswersNothing) {
  auto cache = std::make_unique<QueryCache>();
  const QueryCache::Entry* e = cache->lookup(kComm, Binding::C, 0, 0);
  if (e) {
    for (std::uint64_t version : {std::uint64_t{2}, std::uint64_t{4}, std::uint64_t{1} << 40})
      EXPECT_FALSE(QueryCache::has_answer(*e, version));
    EXPECT_EQ(e->layout(), 0u);
    EXPECT_EQ(e->cursor.object, nullptr);
    EXPECT_EQ(e->pending, 0);
  }
  EXPECT_EQ(cache->find(kComm, Binding::C, 0, 0, 1), nullptr);
  QueryCache::Entry& c = cache->remember(kComm, Binding::FortranAint, kA, 0, 1, 7);
  EXPECT_FALSE(cache->other_pending(c));
  cache->drop_other_answers(c);  // (must not touch an empty entry in c's set)
  const QueryCache::Entry* empty = cache->lookup(kComm, Binding::C, 0, 0);
  if (empty) {
    EXPECT_EQ(empty->version, 0u);
  }
}

TEST(QueryCache, OtherBindingsOfAQueryWithAPendingSet) {
  auto cache = std::make_unique<QueryCache>();
  QueryCache::Entry& c = cache->remember(kComm, Binding::C, kA, 10, 1, 7);
  QueryCache::Entry& f = cache->remember(kComm, Binding::FortranAint, kA, 10, 1, 7);
  QueryCache::Entry& c_ref = *cache->lookup(kComm, Binding::C, kA, 10);  // (remember may move entries)
  ASSERT_EQ(&f, cache->lookup(kComm, Binding::FortranAint, kA, 10));
  QueryCache::remember_answer(c_ref, 4, 100, 1);
  QueryCache::remember_answer(f, 4, 100, 1);
  EXPECT_FALSE(cache->other_pending(c_ref));
  EXPECT_FALSE(cache->other_pending(f));
  c_ref.pending = 1;  // a set of the C query waits
  EXPECT_TRUE(cache->other_pending(f));
  EXPECT_FALSE(cache->other_pending(c_ref));  // itself is not "other"
  cache->drop_other_answers(c_ref);
  EXPECT_FALSE(QueryCache::has_answer(f, 4));
  EXPECT_TRUE(QueryCache::has_answer(c_ref, 4));
  (void)c;
}

TEST(QueryCache, OtherBindingsMeanTheSameObjectKindAndKeyvalOnly) {
  auto cache = std::make_unique<QueryCache>();
  cache->remember(kComm, Binding::C, kA, 10, 1, 7);
  QueryCache::Entry& c = *cache->lookup(kComm, Binding::C, kA, 10);
  QueryCache::remember_answer(c, 4, 100, 1);
  c.pending = 1;
  // Other keyvals, objects or kinds are unaffected (whichever set they land in).
  for (int key = 11; key < 2000; ++key) {
    QueryCache::Entry& o = cache->remember(kComm, Binding::FortranAint, kA, key, 1, 7);
    EXPECT_FALSE(cache->other_pending(o)) << key;
    c.pending = 0;  // (remember would otherwise be moving a pending entry)
    if (cache->lookup(kComm, Binding::C, kA, 10) != &c) break;  // evicted: done
    c.pending = 1;
  }
  QueryCache::Entry& t = cache->remember(ObjectKind::Type, Binding::FortranAint, kA, 10, 1, 7);
  EXPECT_FALSE(cache->other_pending(t));
}

// An entry's tag holds its keyval times QueryCache::kKeyMul (the product the set's hash uses, so
// the lookup compares it as computed): the tag must still name exactly one keyval, and key()
// must give it back, for every keyval a library hands out (negative ones included).
TEST(QueryCache, ATagNamesExactlyItsKeyval) {
  const int keys[] = {0, 1, 2, 10, -1, -10, 0x40000001, std::numeric_limits<int>::max(),
                      std::numeric_limits<int>::min()};
  for (int key : keys) {
    auto cache = std::make_unique<QueryCache>();
    QueryCache::Entry& e = cache->remember(kComm, Binding::C, kA, key, 1, 7);
    EXPECT_EQ(e.key(), key);
    EXPECT_TRUE(e.has_key(key));
    EXPECT_FALSE(e.has_key(key ^ 1));
    EXPECT_EQ(QueryCache::key_of(QueryCache::tag(kComm, Binding::C, key)), key);
    EXPECT_EQ(QueryCache::tag(kComm, Binding::C, key), e.query);
    EXPECT_EQ(cache->lookup(kComm, Binding::C, kA, key), &e);
    EXPECT_EQ(cache->lookup(kComm, Binding::C, kA, key ^ 1), nullptr);
    // Only keyval 0's tag is 0: the empty entry holds no other keyval's C communicator query.
    EXPECT_EQ(QueryCache::tag(kComm, Binding::C, key) == 0, key == 0);
  }
  // Other kinds and bindings keep their bits above the keyval's.
  EXPECT_EQ(QueryCache::key_of(QueryCache::tag(ObjectKind::Win, Binding::FortranInt, -7)), -7);
  EXPECT_NE(QueryCache::tag(ObjectKind::Win, Binding::FortranInt, -7), QueryCache::tag(kComm, Binding::C, -7));
}
