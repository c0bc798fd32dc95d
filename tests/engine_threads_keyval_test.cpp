// Multi-threaded stress tests of the cache engine (MPI_THREAD_MULTIPLE semantics): keyvals.
// Keyvals freed while other threads' attributes use them; create / free storms.
// Shared set-up: engine_threads_fixtures.hpp.

#include <gtest/gtest.h>

#include "engine_threads_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_threads_fixtures;

// ---------------------------------------------------------------------------------------------
// 2. Keyvals created by the main thread, used by every thread on its own objects, then freed by
//    the main thread while attributes still use them. Every attribute instance (set or copied)
//    gets exactly one delete callback; the freed keyvals die with their last attribute.
// ---------------------------------------------------------------------------------------------

TEST_F(EngineThreads, SharedKeyvalsFreedWhileAttributesUseThem) {
  constexpr int kThreads = 6;
  constexpr int kKeys = 6;
  constexpr int kInitialObjects = 8;
  constexpr int kMinObjects = 4;
  constexpr int kMaxObjects = 20;
  const int ops = scaled(40000);
  constexpr ObjectKind kComm = ObjectKind::Comm;
  constexpr std::uint64_t kUnknown = ~0ULL;  // present, value not learnable (keyval freed)

  Engine engine;
  Failures failures;
  const std::size_t capacity =
      static_cast<std::size_t>(kThreads) *
          (static_cast<std::size_t>(kInitialObjects * kKeys) +
           static_cast<std::size_t>(ops) * (1 + kKeys)) +
      1024;
  InstanceRegistry registry(capacity, &failures);

  std::array<InstKeyCtx, kKeys> key_ctx;
  std::array<KeyvalId, kKeys> key{};
  create_inst_keyvals(engine, &registry, &failures, key_ctx, key);
  if (HasFatalFailure()) return;
  // The main thread frees key k inside [free_started[k] = true, freed[k] = true].
  std::array<std::atomic<bool>, kKeys> free_started{};
  std::array<std::atomic<bool>, kKeys> freed{};
  for (int k = 0; k < kKeys; ++k) {
    free_started[k].store(false);
    freed[k].store(false);
  }
  std::atomic<long> ops_done{0};
  Barrier phase2(kThreads + 1);

  struct Obj {
    Handle handle;
    std::array<std::uint64_t, kKeys> value;  // 0 = absent
  };

  auto thread_main = [&](int tid) {
    Rng rng(0x5EED0000ULL + static_cast<std::uint64_t>(tid));
    std::vector<Obj> objs;
    std::uint64_t serial = 0;

    // Checks a status against when the keyval was freed: `freed_before` read before the call,
    // `started_after` after it.
    auto keyval_status_ok = [&](int k, bool freed_before, bool started_after, Result r,
                                const char* what) {
      if (freed_before) {
        TCHECK(failures, r.status == Status::KeyvalFreed,
               what << " after the keyval was freed: " << str(r));
      } else if (!started_after) {
        TCHECK(failures, r.status != Status::KeyvalFreed,
               what << " before the keyval was freed: " << str(r));
      }
      (void)k;
      return r.status != Status::KeyvalFreed;
    };
    auto set_new = [&](Obj& o, int k) {
      const std::uint64_t id = registry.allocate(kTagSet);
      const bool before = freed[k].load();
      const Result r = engine.set_attr(kComm, o.handle, key[k], Binding::C,
                                       InstanceRegistry::encode(id));
      const bool after = free_started[k].load();
      keyval_status_ok(k, before, after, r, "set");
      if (r.ok()) {
        registry.set_state(id, InstanceRegistry::kLive);
        o.value[k] = InstanceRegistry::encode(id);
      } else {
        TCHECK(failures, r.status == Status::KeyvalFreed, "set: " << str(r));
        registry.set_state(id, InstanceRegistry::kRejected);
      }
    };
    auto new_object = [&]() {
      Obj o{own_handle(tid, serial++), {}};
      const Result r = engine.create_object(kComm, o.handle);
      TCHECK(failures, r.ok(), "create_object: " << str(r));
      return o;
    };

    // Phase 1: objects with every key set (no keyval is freed before the barrier).
    for (int i = 0; i < kInitialObjects; ++i) {
      objs.push_back(new_object());
      for (int k = 0; k < kKeys; ++k) set_new(objs.back(), k);
    }
    phase2.arrive_and_wait();

    // Phase 2: random operations while the main thread frees the keyvals one by one.
    for (int i = 0; i < ops; ++i) {
      const std::size_t oi = static_cast<std::size_t>(rng.below(static_cast<int>(objs.size())));
      const int k = rng.below(kKeys);
      const int op = rng.below(100);
      if (op < 35) {  // get
        Obj& o = objs[oi];
        const bool before = freed[k].load();
        const Got g = get_c(engine, kComm, o.handle, key[k]);
        const bool after = free_started[k].load();
        if (keyval_status_ok(k, before, after, g.r, "get")) {
          TCHECK(failures, g.r.ok(), "get: " << str(g.r));
          if (o.value[k] == kUnknown) {
            TCHECK(failures, false, "get succeeded with a keyval known to be freed");
          } else if (o.value[k] == 0) {
            TCHECK(failures, g.flag == 0, "get of absent attribute: flag " << g.flag);
          } else {
            TCHECK(failures, g.flag == 1 && g.value == o.value[k],
                   "get: flag " << g.flag << " value " << hex(g.value) << " expected "
                                << hex(o.value[k]));
          }
        }
      } else if (op < 60) {  // set (new or replace)
        set_new(objs[oi], k);
      } else if (op < 75) {  // delete
        Obj& o = objs[oi];
        const bool before = freed[k].load();
        const Result r = engine.delete_attr(kComm, o.handle, key[k]);
        const bool after = free_started[k].load();
        if (before || after) {
          // A freed key is still good for deleting the attributes that use it (MPI_COMM_FREE_KEYVAL);
          // an attribute this thread set keeps the key alive. Without one, the key may be gone.
          if (o.value[k] != 0) {
            TCHECK(failures, r.ok(), "delete through a freed key in use: " << str(r));
            o.value[k] = 0;
          } else {
            TCHECK(failures, r.status == Status::AttrAbsent || r.status == Status::KeyvalFreed,
                   "delete absent through a freed key: " << str(r));
          }
        } else if (keyval_status_ok(k, before, after, r, "delete")) {
          if (o.value[k] == 0) {
            TCHECK(failures, r.status == Status::AttrAbsent, "delete absent: " << str(r));
          } else {
            TCHECK(failures, r.ok(), "delete: " << str(r));
            o.value[k] = 0;
          }
        }
      } else if ((op < 88 && objs.size() < kMaxObjects) || objs.size() <= kMinObjects) {  // dup
        const Obj& old = objs[oi];
        Obj copy{own_handle(tid, serial++), {}};
        const Result r = engine.dup_object(kComm, old.handle, copy.handle);
        TCHECK(failures, r.ok(), "dup: " << str(r));
        if (r.ok()) {
          for (int kk = 0; kk < kKeys; ++kk) {
            const bool before = freed[kk].load();
            const Got g = get_c(engine, kComm, copy.handle, key[kk]);
            const bool after = free_started[kk].load();
            if (!keyval_status_ok(kk, before, after, g.r, "get after dup")) {
              copy.value[kk] = old.value[kk] == 0 ? 0 : kUnknown;
              continue;
            }
            TCHECK(failures, g.r.ok(), "get after dup: " << str(g.r));
            if (old.value[kk] == 0) {
              TCHECK(failures, g.flag == 0, "dup created an attribute: flag " << g.flag);
              copy.value[kk] = 0;
            } else {
              TCHECK(failures, g.flag == 1, "dup lost an attribute: flag " << g.flag);
              std::uint64_t id = 0;
              const bool known = g.flag == 1 && registry.decode(g.value, &id);
              TCHECK(failures, known, "dup produced value " << hex(g.value));
              if (known) {
                TCHECK(failures, registry.tag(id) == kTagCopy && g.value != old.value[kk],
                       "dup kept the original value instead of the copy callback's");
                copy.value[kk] = g.value;
              } else {
                copy.value[kk] = kUnknown;
              }
            }
          }
          objs.push_back(copy);
        }
      } else {  // free an object: its remaining attributes (freed keyvals too) are deleted
        const Result r = engine.free_object(kComm, objs[oi].handle);
        TCHECK(failures, r.ok(), "free_object: " << str(r));
        objs[oi] = objs.back();
        objs.pop_back();
      }
      ops_done.fetch_add(1);
    }

    // Phase 3: free everything.
    for (const Obj& o : objs) {
      const Result r = engine.free_object(kComm, o.handle);
      TCHECK(failures, r.ok(), "final free_object: " << str(r));
    }
  };

  std::thread main_freer([&] {
    phase2.arrive_and_wait();
    const long total = static_cast<long>(kThreads) * ops;
    for (int k = 0; k < kKeys; ++k) {
      // Spread the frees over phase 2 (no clock: by the threads' progress).
      const long threshold = total * (k + 1) / (kKeys + 1);
      while (ops_done.load() < threshold) std::this_thread::yield();
      KeyvalId id = key[k];
      free_started[k].store(true);
      const Result r = engine.free_keyval(kComm, &id);
      freed[k].store(true);
      TCHECK(failures, r.ok(), "free_keyval: " << str(r));
      TCHECK(failures, id == EngineConfig{}.keyval_invalid, "free_keyval left id " << id);
    }
  });
  run_threads(kThreads, thread_main);
  main_freer.join();

  for (int k = 0; k < kKeys; ++k) {
    // A stale copy of a freed keyval, whose attributes are all gone: still recognised as freed.
    KeyvalId stale = key[k];
    EXPECT_EQ(engine.free_keyval(kComm, &stale).status, Status::KeyvalDoubleFree);
  }
  const long live_instances = registry.verify_all_deleted_once("shared keyvals");
  long deletes = 0;
  long copies = 0;
  for (const InstKeyCtx& c : key_ctx) {
    deletes += c.deletes.load();
    copies += c.copies.load();
  }
  EXPECT_EQ(deletes, live_instances);
  EXPECT_GT(copies, 0);
  EXPECT_TRUE(engine.live_keyvals().empty()) << engine.live_keyvals().size() << " keyvals alive";
  EXPECT_TRUE(engine.attributes().empty());
  EXPECT_TRUE(engine.objects().empty());
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// ---------------------------------------------------------------------------------------------
// 5. create_keyval / free_keyval storms: ids unique among keyvals alive in the engine at any time
//    (user-held, or freed but kept alive by attributes), never keyval_invalid, never a predefined
//    id; stale ids are recognised as freed.
// ---------------------------------------------------------------------------------------------

class KeyvalStorm : public EngineThreads, public ::testing::WithParamInterface<KeyvalId> {};

std::atomic<long> g_storm_deletes{0};
int storm_delete(Handle, int, void*, void*) {
  g_storm_deletes.fetch_add(1);
  return 0;
}
int storm_copy(Handle, int, void*, void* attribute_val_in, void* attribute_val_out, int* flag) {
  write_out(attribute_val_out, as_word(attribute_val_in));
  *flag = 1;
  return 0;
}

TEST_P(KeyvalStorm, IdsUniqueAmongLiveKeyvals) {
  constexpr int kThreads = 6;
  constexpr std::size_t kMaxHeld = 12;
  const int ops = scaled(50000);
  const KeyvalId invalid = GetParam();

  EngineConfig config;
  config.keyval_invalid = invalid;
  Engine engine(config);
  Failures failures;
  g_storm_deletes.store(0);

  // Predefined ids that a naive allocator could hand out.
  const std::vector<std::pair<ObjectKind, KeyvalId>> predefined = {
      {ObjectKind::Comm, 2}, {ObjectKind::Comm, 3}, {ObjectKind::Comm, 0x64400001},
      {ObjectKind::Win, 0x66000001}, {ObjectKind::Type, 5}};
  std::set<KeyvalId> predefined_ids;
  for (const auto& p : predefined) {
    ASSERT_EQ(engine.register_predefined_keyval(p.first, p.second, "PREDEFINED").status,
              Status::Ok);
    predefined_ids.insert(p.second);
  }

  std::mutex live_mutex;
  std::set<KeyvalId> live;  // alive in the engine: user-held, or freed but used by an attribute
  std::atomic<long> creates{0};
  std::array<long, kThreads> expected_deletes{};

  auto thread_main = [&](int tid) {
    Rng rng(0xABCD00ULL + static_cast<std::uint64_t>(tid));
    struct Held {
      KeyvalId id;
      ObjectKind kind;
      bool user_delete;
    };
    std::vector<Held> held;
    std::array<std::vector<Held>, kObjectKinds> zombies;  // freed, kept alive by z[kind]
    std::array<Handle, kObjectKinds> z{};
    std::uint64_t serial = 0;
    long deletes = 0;
    for (int kind = 0; kind < kObjectKinds; ++kind) {
      z[kind] = own_handle(tid, static_cast<std::uint64_t>(kind));
      const Result r = engine.create_object(static_cast<ObjectKind>(kind), z[kind]);
      TCHECK(failures, r.ok(), str(r));
    }

    auto erase_live = [&](KeyvalId id) {
      std::lock_guard<std::mutex> lock(live_mutex);
      const bool erased = live.erase(id) == 1;
      TCHECK(failures, erased, "keyval " << id << " missing from the live set");
    };
    auto create = [&] {
      const auto kind = static_cast<ObjectKind>(rng.below(kObjectKinds));
      const auto copy = static_cast<CopyAction>(rng.below(3));
      const bool user_delete = rng.below(2) == 0;
      KeyvalId id = invalid;
      const Result r = engine.create_keyval(
          native_spec(kind, copy, storm_copy,
                      user_delete ? DeleteAction::User : DeleteAction::NullDelete, storm_delete,
                      nullptr),
          &id);
      TCHECK(failures, r.ok(), "create_keyval: " << str(r));
      if (!r.ok()) return;
      creates.fetch_add(1);
      TCHECK(failures, id != invalid, "create_keyval returned keyval_invalid " << id);
      TCHECK(failures, id > 0, "create_keyval returned " << id);
      TCHECK(failures, predefined_ids.count(id) == 0, "create_keyval returned predefined " << id);
      TCHECK(failures, engine.is_engine_keyval(id), "is_engine_keyval(" << id << ") false");
      bool inserted = false;
      {
        std::lock_guard<std::mutex> lock(live_mutex);
        inserted = live.insert(id).second;
      }
      TCHECK(failures, inserted, "create_keyval returned id " << id << ", which is alive");
      if (inserted) held.push_back({id, kind, user_delete});
    };
    auto take_random = [&] {
      const std::size_t i = static_cast<std::size_t>(rng.below(static_cast<int>(held.size())));
      const Held h = held[i];
      held[i] = held.back();
      held.pop_back();
      return h;
    };
    auto free_one = [&] {
      Held h = take_random();
      const KeyvalId stale = h.id;
      erase_live(h.id);  // before the free: from then on the id may be handed out again
      const Result r = engine.free_keyval(h.kind, &h.id);
      TCHECK(failures, r.ok(), "free_keyval: " << str(r));
      TCHECK(failures, h.id == invalid, "free_keyval left " << h.id);
      const Got g = get_c(engine, h.kind, z[static_cast<int>(h.kind)], stale);
      TCHECK(failures, g.r.status == Status::KeyvalFreed, "get with stale id: " << str(g.r));
      KeyvalId again = stale;
      const Result r2 = engine.free_keyval(h.kind, &again);
      TCHECK(failures, r2.status == Status::KeyvalDoubleFree, "double free: " << str(r2));
    };
    auto zombify = [&] {
      Held h = take_random();
      const int kind = static_cast<int>(h.kind);
      Result r = engine.set_attr(h.kind, z[kind], h.id, Binding::C, own_value(tid, serial++));
      TCHECK(failures, r.ok(), "zombie set: " << str(r));
      if (r.ok() && h.user_delete) ++deletes;
      const KeyvalId stale = h.id;
      r = engine.free_keyval(h.kind, &h.id);  // stays alive (and in `live`): z[kind] uses it
      TCHECK(failures, r.ok(), "zombie free_keyval: " << str(r));
      const Got g = get_c(engine, h.kind, z[kind], stale);
      TCHECK(failures, g.r.status == Status::KeyvalFreed, "get with zombie id: " << str(g.r));
      zombies[kind].push_back({stale, h.kind, h.user_delete});
    };
    auto release = [&](int kind) {
      for (const Held& h : zombies[kind]) erase_live(h.id);  // before they can be destroyed
      zombies[kind].clear();
      const auto k = static_cast<ObjectKind>(kind);
      Result r = engine.free_object(k, z[kind]);
      TCHECK(failures, r.ok(), "free zombie holder: " << str(r));
      r = engine.create_object(k, z[kind]);
      TCHECK(failures, r.ok(), "recreate zombie holder: " << str(r));
    };

    for (int i = 0; i < ops; ++i) {
      const int choice = rng.below(16);
      if (held.empty() || (held.size() < kMaxHeld && choice < 7)) {
        create();
      } else if (choice < 13) {
        free_one();
      } else if (choice < 15) {
        zombify();
      } else {
        release(rng.below(kObjectKinds));
      }
    }
    while (!held.empty()) free_one();
    for (int kind = 0; kind < kObjectKinds; ++kind) {
      release(kind);
      const Result r = engine.free_object(static_cast<ObjectKind>(kind), z[kind]);
      TCHECK(failures, r.ok(), str(r));
    }
    expected_deletes[tid] = deletes;
  };
  run_threads(kThreads, thread_main);

  long expected = 0;
  for (long d : expected_deletes) expected += d;
  EXPECT_EQ(g_storm_deletes.load(), expected);
  EXPECT_GE(creates.load(), static_cast<long>(kThreads) * ops / 3);
  EXPECT_TRUE(live.empty());
  EXPECT_TRUE(engine.live_keyvals().empty()) << engine.live_keyvals().size() << " keyvals alive";
  EXPECT_TRUE(engine.attributes().empty());
  EXPECT_TRUE(engine.objects().empty());
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// -1: Open MPI's MPI_KEYVAL_INVALID; 0x24000000: MPICH's; 1: a small id an allocator would use.
INSTANTIATE_TEST_SUITE_P(KeyvalInvalid, KeyvalStorm,
                         ::testing::Values(KeyvalId{-1}, KeyvalId{0x24000000}, KeyvalId{1}));

}  // namespace
