// Multi-threaded stress tests of the cache engine (MPI_THREAD_MULTIPLE semantics): objects.
// Threads cycling their own objects while a shared object's attributes are replaced and read;
// dups of a shared object racing with sets and deletes; an object held for another thread
// (Engine::hold_object). Shared set-up: engine_threads_fixtures.hpp.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "engine_threads_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_threads_fixtures;

// ---------------------------------------------------------------------------------------------
// 1. Each thread owns objects and keyvals and cycles them, while all threads read a shared
//    object whose attributes a writer thread keeps replacing and deleting.
// ---------------------------------------------------------------------------------------------

TEST_F(EngineThreads, OwnedCyclesWhileSharedObjectIsReplaced) {
  constexpr int kWorkers = 5;  // + 1 writer = 6 threads
  const int cycles = scaled(2000);
  constexpr ObjectKind kComm = ObjectKind::Comm;

  Engine engine;
  Failures failures;
  const Handle shared = kSharedBase + 1;
  ASSERT_EQ(engine.create_object(kComm, shared).status, Status::Ok);

  std::array<SharedKeyCtx, kSharedKeys> shared_ctx;
  std::array<KeyvalId, kSharedKeys> shared_key{};
  for (int j = 0; j < kSharedKeys; ++j) {
    shared_ctx[j].failures = &failures;
    shared_ctx[j].key = j;
    const KeyvalSpec spec = native_spec(kComm, CopyAction::NullCopy, nullptr, DeleteAction::User,
                                        shared_delete, &shared_ctx[j]);
    ASSERT_EQ(engine.create_keyval(spec, &shared_key[j]).status, Status::Ok);
  }

  std::array<OwnCtx, kWorkers> own_ctx;
  for (int t = 0; t < kWorkers; ++t) {
    own_ctx[t].failures = &failures;
    own_ctx[t].tid = t;
  }
  std::array<long, kWorkers> expected_deletes{};
  std::array<long, kWorkers> expected_copies{};
  std::atomic<int> workers_done{0};
  std::atomic<long> shared_hits{0};

  // The writer's model of the shared object (only the writer touches these until joined).
  std::array<bool, kSharedKeys> present{};
  long writer_expected_deletes = 0;
  long writer_ops = 0;

  Barrier start(kWorkers + 1);

  auto shared_reads = [&](int rounds) {
    for (int i = 0; i < rounds; ++i) {
      for (int j = 0; j < kSharedKeys; ++j) {
        const Got g = get_c(engine, kComm, shared, shared_key[j]);
        TCHECK(failures, g.r.ok(), "shared get: " << str(g.r));
        TCHECK(failures, g.flag == 0 || g.flag == 1, "shared get flag " << g.flag);
        if (g.flag == 1) {
          TCHECK(failures, shared_value_ok(j, g.value),
                 "shared get of key " << j << " returned " << hex(g.value));
          shared_hits.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  };

  auto worker = [&](int tid) {
    OwnCtx& ctx = own_ctx[tid];
    std::uint64_t serial = 0;
    long deletes = 0;
    long copies = 0;
    auto expect_value = [&](Handle h, KeyvalId k, std::uint64_t v, const char* what) {
      const Got g = get_c(engine, kComm, h, k);
      TCHECK(failures, g.r.ok() && g.flag == 1 && g.value == v,
             what << ": " << str(g.r) << " flag " << g.flag << " value " << hex(g.value)
                  << " expected " << hex(v));
    };
    auto expect_absent = [&](Handle h, KeyvalId k, const char* what) {
      const Got g = get_c(engine, kComm, h, k);
      TCHECK(failures, g.r.ok() && g.flag == 0, what << ": " << str(g.r) << " flag " << g.flag);
    };
    start.arrive_and_wait();
    for (int cycle = 0; cycle < cycles; ++cycle) {
      KeyvalId ka = 0;  // Dup + user delete
      KeyvalId kb = 0;  // user copy + user delete
      KeyvalId kc = 0;  // NullCopy + NullDelete, set from Fortran
      Result r = engine.create_keyval(
          native_spec(kComm, CopyAction::Dup, nullptr, DeleteAction::User, own_delete, &ctx), &ka);
      TCHECK(failures, r.ok(), "create ka: " << str(r));
      r = engine.create_keyval(
          native_spec(kComm, CopyAction::User, own_copy, DeleteAction::User, own_delete, &ctx), &kb);
      TCHECK(failures, r.ok(), "create kb: " << str(r));
      r = engine.create_keyval(native_spec(kComm, CopyAction::NullCopy, nullptr,
                                           DeleteAction::NullDelete, nullptr, &ctx),
                               &kc);
      TCHECK(failures, r.ok(), "create kc: " << str(r));

      const Handle o = own_handle(tid, 2 * static_cast<std::uint64_t>(cycle));
      const Handle o2 = own_handle(tid, 2 * static_cast<std::uint64_t>(cycle) + 1);
      r = engine.create_object(kComm, o);
      TCHECK(failures, r.ok(), "create_object: " << str(r));

      const std::uint64_t a1 = own_value(tid, serial++);
      const std::uint64_t a2 = own_value(tid, serial++);
      const std::uint64_t b1 = own_value(tid, serial++);
      const std::uint64_t c1 = own_value(tid, serial++);
      r = engine.set_attr(kComm, o, ka, Binding::C, a1);
      TCHECK(failures, r.ok(), "set a1: " << str(r));
      r = engine.set_attr(kComm, o, kb, Binding::C, b1);
      TCHECK(failures, r.ok(), "set b1: " << str(r));
      r = engine.set_attr(kComm, o, kc, Binding::FortranAint, c1);
      TCHECK(failures, r.ok(), "set c1: " << str(r));
      expect_value(o, ka, a1, "get a1");
      expect_value(o, kb, b1, "get b1");
      {
        std::int64_t fv = 0;
        int flag = -1;
        r = engine.get_attr(kComm, o, kc, Binding::FortranAint, &fv, &flag);
        TCHECK(failures, r.ok() && flag == 1 && static_cast<std::uint64_t>(fv) == c1,
               "get c1 as FortranAint: " << str(r) << " flag " << flag);
        // A C read of a Fortran-set attribute is a pointer to the stored integer.
        void* p = nullptr;
        flag = -1;
        r = engine.get_attr(kComm, o, kc, Binding::C, &p, &flag);
        TCHECK(failures, r.ok() && flag == 1 && p != nullptr,
               "get c1 as C: " << str(r) << " flag " << flag);
        if (r.ok() && flag == 1 && p != nullptr) {
          std::int64_t stored = 0;
          std::memcpy(&stored, p, sizeof stored);
          TCHECK(failures, static_cast<std::uint64_t>(stored) == c1,
                 "C read of Fortran value points at " << hex(static_cast<std::uint64_t>(stored)));
        }
      }
      shared_reads(4);

      r = engine.set_attr(kComm, o, ka, Binding::C, a2);  // replaces a1: one delete callback
      TCHECK(failures, r.ok(), "set a2: " << str(r));
      ++deletes;
      expect_value(o, ka, a2, "get a2");

      r = engine.dup_object(kComm, o, o2);  // ka: Dup, kb: user copy, kc: not copied
      TCHECK(failures, r.ok(), "dup: " << str(r));
      ++copies;
      expect_value(o2, ka, a2, "dup ka");
      expect_value(o2, kb, b1 ^ (kCopyFlip << 56), "dup kb");
      expect_absent(o2, kc, "dup kc");
      shared_reads(4);

      r = engine.delete_attr(kComm, o, ka);
      TCHECK(failures, r.ok(), "delete a2: " << str(r));
      ++deletes;
      expect_absent(o, ka, "after delete");
      r = engine.delete_attr(kComm, o, ka);
      TCHECK(failures, r.status == Status::AttrAbsent, "second delete: " << str(r));

      // Free kb while o and o2 still carry it: a stale copy is refused, the attributes live on.
      const KeyvalId kb_stale = kb;
      r = engine.free_keyval(kComm, &kb);
      TCHECK(failures, r.ok() && kb == EngineConfig{}.keyval_invalid, "free kb: " << str(r));
      {
        const Got g = get_c(engine, kComm, o, kb_stale);
        TCHECK(failures, g.r.status == Status::KeyvalFreed, "stale kb get: " << str(g.r));
      }
      r = engine.free_object(kComm, o);  // kb's b1 (user), kc (NullDelete)
      TCHECK(failures, r.ok(), "free o: " << str(r));
      ++deletes;

      r = engine.free_keyval(kComm, &ka);
      TCHECK(failures, r.ok(), "free ka: " << str(r));
      shared_reads(4);
      r = engine.free_object(kComm, o2);  // a2 (Dup copy), b1^flip (user copy)
      TCHECK(failures, r.ok(), "free o2: " << str(r));
      deletes += 2;
      r = engine.free_keyval(kComm, &kc);
      TCHECK(failures, r.ok(), "free kc: " << str(r));
    }
    expected_deletes[tid] = deletes;
    expected_copies[tid] = copies;
    workers_done.fetch_add(1);
  };

  auto writer = [&] {
    Rng rng(0xC0FFEE);
    start.arrive_and_wait();
    while (workers_done.load() < kWorkers) {
      const int j = rng.below(kSharedKeys);
      if (rng.below(8) == 0) {
        const Result r = engine.delete_attr(kComm, shared, shared_key[j]);
        if (present[j]) {
          TCHECK(failures, r.ok(), "writer delete: " << str(r));
          if (r.ok()) ++writer_expected_deletes;
          present[j] = false;
        } else {
          TCHECK(failures, r.status == Status::AttrAbsent, "writer delete absent: " << str(r));
        }
      } else {
        const Result r = engine.set_attr(kComm, shared, shared_key[j], Binding::C,
                                         shared_value(j, rng.below(kSharedValuesPerKey)));
        TCHECK(failures, r.ok(), "writer set: " << str(r));
        if (r.ok()) {
          if (present[j]) ++writer_expected_deletes;
          present[j] = true;
        }
      }
      ++writer_ops;
    }
  };

  run_threads(kWorkers + 1, [&](int tid) {
    if (tid == kWorkers) {
      writer();
    } else {
      worker(tid);
    }
  });

  ASSERT_EQ(engine.free_object(kComm, shared).status, Status::Ok);
  for (int j = 0; j < kSharedKeys; ++j) {
    if (present[j]) ++writer_expected_deletes;
  }
  long shared_deletes = 0;
  for (const SharedKeyCtx& c : shared_ctx) shared_deletes += c.deletes.load();
  EXPECT_EQ(shared_deletes, writer_expected_deletes) << "writer ops: " << writer_ops;
  for (int t = 0; t < kWorkers; ++t) {
    EXPECT_EQ(expected_deletes[t], 5L * cycles);
    EXPECT_EQ(own_ctx[t].deletes.load(), expected_deletes[t]) << "thread " << t;
    EXPECT_EQ(own_ctx[t].copies.load(), expected_copies[t]) << "thread " << t;
  }
  for (KeyvalId& k : shared_key) EXPECT_EQ(engine.free_keyval(kComm, &k).status, Status::Ok);
  EXPECT_TRUE(engine.live_keyvals().empty());
  EXPECT_TRUE(engine.attributes().empty());
  EXPECT_TRUE(engine.objects().empty());
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// ---------------------------------------------------------------------------------------------
// 7. Dups of a shared object racing with sets and deletes of its attributes: every copy is a
//    fresh instance made from a value that is not deleted while it is copied, and every
//    instance (original or copy) is deleted exactly once.
// ---------------------------------------------------------------------------------------------

TEST_F(EngineThreads, DupRacesWithSetAndDelete) {
  constexpr int kInstKeys = 3;    // user copy (fresh instance) + user delete
  constexpr int kMutators = 2;
  constexpr int kDuppers = 2;
  const int mutator_iters = scaled(40000);
  const int dupper_iters = scaled(8000);
  constexpr ObjectKind kComm = ObjectKind::Comm;

  Engine engine;
  Failures failures;
  InstanceRegistry registry(static_cast<std::size_t>(kMutators) * static_cast<std::size_t>(mutator_iters) +
                                static_cast<std::size_t>(kDuppers) * static_cast<std::size_t>(dupper_iters) *
                                    kInstKeys +
                                16,
                            &failures);
  const Handle shared = kSharedBase + 4;
  ASSERT_EQ(engine.create_object(kComm, shared).status, Status::Ok);
  std::array<InstKeyCtx, kInstKeys> key_ctx;
  std::array<KeyvalId, kInstKeys + 1> key{};
  create_inst_keyvals(engine, &registry, &failures, key_ctx, key);
  if (HasFatalFailure()) return;
  // A Dup + NullDelete key with values from a known set.
  ASSERT_EQ(engine
                .create_keyval(native_spec(kComm, CopyAction::Dup, nullptr,
                                           DeleteAction::NullDelete, nullptr, nullptr),
                               &key[kInstKeys])
                .status,
            Status::Ok);

  std::array<long, kDuppers> dups{};
  auto mutator = [&](int tid) {
    Rng rng(0xD00D00ULL + static_cast<std::uint64_t>(tid));
    for (int i = 0; i < mutator_iters; ++i) {
      const int k = rng.below(kInstKeys + 1);
      if (rng.below(4) == 0) {
        const Result r = engine.delete_attr(kComm, shared, key[k]);
        TCHECK(failures, r.ok() || r.status == Status::AttrAbsent, "delete: " << str(r));
      } else if (k < kInstKeys) {
        const std::uint64_t id = registry.allocate(kTagSet);
        const Result r =
            engine.set_attr(kComm, shared, key[k], Binding::C, InstanceRegistry::encode(id));
        TCHECK(failures, r.ok(), "set: " << str(r));
        registry.set_state(id, r.ok() ? InstanceRegistry::kLive : InstanceRegistry::kRejected);
      } else {
        const Result r = engine.set_attr(kComm, shared, key[k], Binding::C,
                                         shared_value(0, rng.below(kSharedValuesPerKey)));
        TCHECK(failures, r.ok(), "set: " << str(r));
      }
    }
  };
  auto dupper = [&](int d) {
    const int tid = kMutators + d;
    for (int i = 0; i < dupper_iters; ++i) {
      const Handle h = own_handle(tid, static_cast<std::uint64_t>(i));
      Result r = engine.dup_object(kComm, shared, h);
      TCHECK(failures, r.ok(), "dup: " << str(r));
      if (!r.ok()) continue;
      ++dups[d];
      std::size_t n = 0;
      for (int k = 0; k <= kInstKeys; ++k) {
        const Got g = get_c(engine, kComm, h, key[k]);
        TCHECK(failures, g.r.ok() && (g.flag == 0 || g.flag == 1), "get on dup: " << str(g.r));
        if (!g.r.ok() || g.flag != 1) continue;
        ++n;
        if (k == kInstKeys) {
          TCHECK(failures, shared_value_ok(0, g.value), "Dup-copied value " << hex(g.value));
          continue;
        }
        std::uint64_t id = 0;
        const bool known = registry.decode(g.value, &id);
        TCHECK(failures, known, "copied value " << hex(g.value));
        if (known) {
          TCHECK(failures, registry.tag(id) == kTagCopy && registry.deletes(id) == 0,
                 "copy instance " << id << " tag " << int(registry.tag(id)) << " deletes "
                                  << registry.deletes(id));
        }
      }
      TCHECK(failures, engine.attributes(kComm, h).size() == n,
             "introspection disagrees with gets on the dup");
      r = engine.free_object(kComm, h);
      TCHECK(failures, r.ok(), "free dup: " << str(r));
    }
  };
  run_threads(kMutators + kDuppers, [&](int tid) {
    if (tid < kMutators) {
      mutator(tid);
    } else {
      dupper(tid - kMutators);
    }
  });

  ASSERT_EQ(engine.free_object(kComm, shared).status, Status::Ok);
  const long live = registry.verify_all_deleted_once("dup race");
  long deletes = 0;
  long copies = 0;
  for (const InstKeyCtx& c : key_ctx) {
    deletes += c.deletes.load();
    copies += c.copies.load();
  }
  EXPECT_EQ(deletes, live);
  long copy_instances = 0;
  for (std::uint64_t id = 0; id < registry.allocated(); ++id) {
    if (registry.tag(id) == kTagCopy) ++copy_instances;
  }
  EXPECT_EQ(copies, copy_instances);
  EXPECT_EQ(dups[0] + dups[1], 2L * dupper_iters);
  for (KeyvalId& k : key) EXPECT_EQ(engine.free_keyval(kComm, &k).status, Status::Ok);
  EXPECT_TRUE(engine.live_keyvals().empty());
  EXPECT_TRUE(engine.objects().empty());
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// ---------------------------------------------------------------------------------------------
// 3. An object held for another thread (the runtime's emulate cache running a delete callback
//    when a second thread starts calling): the others' changes wait until the holder's change
//    (which takes the hold over) or release_hold.
// ---------------------------------------------------------------------------------------------

std::atomic<int> held_deletes[4];
int count_held_delete(Handle, int, void* value, void*) {
  ++held_deletes[as_word(value) & 3];
  return 0;
}

struct HeldObject : EngineThreads {
  static constexpr ObjectKind kComm = ObjectKind::Comm;
  static constexpr Handle kObject = kSharedBase + 7;
  HeldObject() {
    for (auto& d : held_deletes) d = 0;
    EXPECT_EQ(engine.create_object(kComm, kObject).status, Status::Ok);
    const KeyvalSpec spec =
        native_spec(kComm, CopyAction::NullCopy, nullptr, DeleteAction::User, count_held_delete, nullptr);
    EXPECT_EQ(engine.create_keyval(spec, &key).status, Status::Ok);
    EXPECT_TRUE(engine.set_attr(kComm, kObject, key, Binding::C, 1).ok());
  }
  // Runs `holder` on a thread of its own, with the object held for it; meanwhile another thread
  // sets the attribute to 2, once it is known to be under way (then `holder` is let go).
  template <typename Holder>
  void race(Holder holder) {
    std::promise<const void*> token;
    std::atomic<int> stage{0};
    std::thread owner([&] {
      token.set_value(Engine::thread_token());
      while (stage.load() < 2) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the set is waiting, if it waits
      holder();
    });
    ASSERT_TRUE(engine.hold_object(kComm, kObject, token.get_future().get()));
    EXPECT_FALSE(engine.hold_object(kComm, kObject, Engine::thread_token()));  // held already
    stage = 1;
    std::thread other([&] {
      stage = 2;
      set_rc = engine.set_attr(kComm, kObject, key, Binding::C, 2).status;
    });
    owner.join();
    other.join();
  }
  Engine engine;
  KeyvalId key = 0;
  Status set_rc = Status::Ok;
};

TEST_F(HeldObject, ChangesWaitForTheHoldersChange) {
  // The holder deletes the attribute whose callback (value 1) ran outside the engine: the other
  // thread's set comes after it, replaces nothing and runs no callback.
  bool ran_ok = false;
  race([&] {
    const RanDelete ran{kObject, key, 1, 0};
    SetCursor cursor;
    ASSERT_TRUE(engine.find_set_cursor(kComm, kObject, key, engine.layout_version(), &cursor, nullptr));
    ran_ok = engine.delete_attr_ran(cursor, &ran);
  });
  EXPECT_TRUE(ran_ok);
  EXPECT_EQ(set_rc, Status::Ok);
  EXPECT_EQ(held_deletes[1].load(), 0);
  const Got g = get_c(engine, kComm, kObject, key);
  EXPECT_TRUE(g.r.ok() && g.flag && g.value == 2);
  // The hold went with the change: the object is free (a hold may be taken again, and released).
  // Another thread's release_hold releases nothing.
  EXPECT_TRUE(engine.hold_object(kComm, kObject, Engine::thread_token()));
  std::thread([&] { engine.release_hold(kComm, kObject); }).join();
  EXPECT_FALSE(engine.hold_object(kComm, kObject, Engine::thread_token()));
  engine.release_hold(kComm, kObject);
  EXPECT_TRUE(engine.delete_attr(kComm, kObject, key).ok());
  EXPECT_EQ(held_deletes[2].load(), 1);
}

TEST_F(HeldObject, HoldersGeneralChangeTakesTheHold) {
  // The holder's own delete_attr is no re-entrant call: it takes the hold over (its callback runs
  // on value 1, before the other thread's set).
  Status del = Status::Ok;
  race([&] { del = engine.delete_attr(kComm, kObject, key).status; });
  EXPECT_EQ(del, Status::Ok);
  EXPECT_EQ(set_rc, Status::Ok);
  EXPECT_EQ(held_deletes[1].load(), 1);
  const Got g = get_c(engine, kComm, kObject, key);
  EXPECT_TRUE(g.r.ok() && g.flag && g.value == 2);
}

TEST_F(HeldObject, ReleaseLetsTheOthersGo) {
  // The holder makes no change (its callback failed): release_hold lets the set through, which
  // then replaces value 1 (its callback runs).
  race([&] {
    engine.release_hold(kComm, kObject);
  });
  EXPECT_EQ(set_rc, Status::Ok);
  EXPECT_EQ(held_deletes[1].load(), 1);
  const Got g = get_c(engine, kComm, kObject, key);
  EXPECT_TRUE(g.r.ok() && g.flag && g.value == 2);
}

}  // namespace
