// Multi-threaded stress tests of the cache engine (MPI_THREAD_MULTIPLE semantics): callbacks.
// Slow callbacks that call back into the engine; a callback waiting for another thread's
// modifications (no engine lock held around a callback); set and delete racing on one attribute
// whose delete callback is slow. Shared set-up: engine_threads_fixtures.hpp.

#include <gtest/gtest.h>

#include "engine_threads_fixtures.hpp"

namespace {

using namespace attrcheck;
using namespace engine_threads_fixtures;

// ---------------------------------------------------------------------------------------------
// 3. Slow callbacks that call back into the engine: a get on their own object, a refused
//    (Reentrant) set/delete on it, and sets on other objects -- one per thread and one shared by
//    all threads. An observer also calls into the engine. Would deadlock if any engine lock were
//    held around a callback.

struct ReCtx {
  Engine* engine = nullptr;
  Failures* failures = nullptr;
  int tid = 0;
  Handle a = 0;     // the thread's object whose attribute has the re-entrant callbacks
  Handle b = 0;     // the thread's "other" object (PETSc's inner communicator)
  Handle sink = 0;  // one object shared by all threads' callbacks
  KeyvalId k_b = 0;
  KeyvalId k_sink = 0;
  std::atomic<std::uint64_t> serial{0};
  std::array<std::atomic<long>, kCauses> deletes_by_cause{};
  std::atomic<long> copies{0};
  std::atomic<long> refused{0};
  std::atomic<long> b_sets{0};
  std::atomic<long> sink_sets{0};
};
struct PlainCtx {
  Failures* failures = nullptr;
  std::atomic<long> deletes{0};
};

// Set, delete and set again on the thread's other object, and a set on the shared sink: served,
// not refused (each runs a nested delete callback when it replaces or deletes a value).
void set_elsewhere(ReCtx* x) {
  Result r = x->engine->set_attr(ObjectKind::Comm, x->b, x->k_b, Binding::C,
                                 own_value(x->tid, x->serial.fetch_add(1)));
  TCHECK(*x->failures, r.ok(), "callback set on another object: " << str(r));
  x->b_sets.fetch_add(1);
  r = x->engine->delete_attr(ObjectKind::Comm, x->b, x->k_b);
  TCHECK(*x->failures, r.ok(), "callback delete on another object: " << str(r));
  r = x->engine->set_attr(ObjectKind::Comm, x->b, x->k_b, Binding::C,
                          own_value(x->tid, x->serial.fetch_add(1)));
  TCHECK(*x->failures, r.ok(), "callback set on another object: " << str(r));
  x->b_sets.fetch_add(1);
  r = x->engine->set_attr(ObjectKind::Comm, x->sink, x->k_sink, Binding::C,
                          own_value(x->tid, x->serial.fetch_add(1)));
  TCHECK(*x->failures, r.ok(), "callback set on the shared object: " << str(r));
  x->sink_sets.fetch_add(1);
}

int reentrant_delete(const DeleteCall& call) {
  auto* x = ctx_from<ReCtx>(call.extra_state);
  spin(kCallbackSpin);
  const Got g = get_c(*x->engine, call.kind, call.object, call.keyval);
  TCHECK(*x->failures, g.r.ok() && (g.flag == 0 || g.flag == 1),
         "get from a delete callback (" << to_string(call.cause) << "): " << str(g.r));
  if (g.r.ok() && g.flag == 1) {
    TCHECK(*x->failures, own_value_ok(x->tid, g.value), "get in callback: " << hex(g.value));
  }
  Result r = x->engine->set_attr(call.kind, call.object, call.keyval, Binding::C, 1);
  TCHECK(*x->failures, r.status == Status::Reentrant,
         "set on own object from a delete callback (" << to_string(call.cause) << "): " << str(r));
  r = x->engine->delete_attr(call.kind, call.object, call.keyval);
  TCHECK(*x->failures, r.status == Status::Reentrant,
         "delete on own object from a delete callback (" << to_string(call.cause)
                                                         << "): " << str(r));
  x->refused.fetch_add(2);
  set_elsewhere(x);
  spin(kCallbackSpin);
  x->deletes_by_cause[static_cast<std::size_t>(call.cause)].fetch_add(1);
  return 0;
}

int reentrant_copy(const CopyCall& call, std::uint64_t* value_out, int* flag) {
  auto* x = ctx_from<ReCtx>(call.extra_state);
  spin(kCallbackSpin);
  const Got g = get_c(*x->engine, call.kind, call.old_object, call.keyval);
  TCHECK(*x->failures, g.r.ok() && g.flag == 1 && g.value == call.value_in,
         "get from a copy callback: " << str(g.r) << " flag " << g.flag << " value "
                                      << hex(g.value) << " expected " << hex(call.value_in));
  const Result r = x->engine->set_attr(call.kind, call.old_object, call.keyval, Binding::C, 1);
  TCHECK(*x->failures, r.status == Status::Reentrant,
         "set on the old object from a copy callback: " << str(r));
  x->refused.fetch_add(1);
  set_elsewhere(x);
  spin(kCallbackSpin);
  *value_out = call.value_in ^ (kCopyFlip << 56);
  *flag = 1;
  x->copies.fetch_add(1);
  return 0;
}

int plain_delete(const DeleteCall& call) {
  auto* p = ctx_from<PlainCtx>(call.extra_state);
  TCHECK(*p->failures,
         call.cause == CallbackCause::Set || call.cause == CallbackCause::Delete ||
             call.cause == CallbackCause::Free,
         "plain delete callback cause " << to_string(call.cause));
  spin(kCallbackSpin / 4);
  p->deletes.fetch_add(1);
  return 0;
}

// Counts callback events; also calls into the engine itself.
class ProbingObserver final : public Observer {
 public:
  void arm(const Engine* engine, Handle probe_object, KeyvalId probe_key, Failures* failures) {
    engine_ = engine;
    probe_object_ = probe_object;
    probe_key_ = probe_key;
    failures_ = failures;
  }
  void on_callback(const CallbackEvent& event) override {
    if (event.which == CallbackEvent::Which::Copy) {
      copies.fetch_add(1);
    } else {
      deletes.fetch_add(1);
    }
    if (event.rc != 0 || event.threw) bad.fetch_add(1);
    if (engine_ != nullptr) {
      const Got g = get_c(*engine_, ObjectKind::Comm, probe_object_, probe_key_);
      TCHECK(*failures_, g.r.ok() || g.r.status == Status::ObjectUnknown,
             "get from the observer: " << str(g.r));
    }
  }
  std::atomic<long> copies{0};
  std::atomic<long> deletes{0};
  std::atomic<long> bad{0};

 private:
  // Set before any thread starts, constant afterwards.
  const Engine* engine_ = nullptr;
  Handle probe_object_ = 0;
  KeyvalId probe_key_ = 0;
  Failures* failures_ = nullptr;
};

TEST_F(EngineThreads, SlowCallbacksCallBackIntoTheEngine) {
  constexpr int kThreads = 4;
  const int iters = scaled(6000);
  constexpr ObjectKind kComm = ObjectKind::Comm;

  TestInvoker invoker;
  ProbingObserver observer;
  EngineConfig config;
  config.invoker = &invoker;
  config.observer = &observer;
  Engine engine(config);
  Failures failures;

  const Handle sink = kSharedBase + 2;
  ASSERT_EQ(engine.create_object(kComm, sink).status, Status::Ok);
  KeyvalId probe = 0;
  ASSERT_EQ(engine
                .create_keyval(test_spec(kComm, CopyAction::NullCopy, nullptr,
                                         DeleteAction::NullDelete, nullptr, nullptr),
                               &probe)
                .status,
            Status::Ok);
  observer.arm(&engine, sink, probe, &failures);

  std::array<ReCtx, kThreads> ctx;
  std::array<PlainCtx, kThreads> plain_b;
  std::array<PlainCtx, kThreads> plain_sink;
  std::array<KeyvalId, kThreads> k_re{};

  auto thread_main = [&](int tid) {
    ReCtx& x = ctx[tid];
    x.engine = &engine;
    x.failures = &failures;
    x.tid = tid;
    x.a = own_handle(tid, 0);
    x.b = own_handle(tid, 1);
    x.sink = sink;
    plain_b[tid].failures = &failures;
    plain_sink[tid].failures = &failures;
    Result r = engine.create_object(kComm, x.a);
    TCHECK(failures, r.ok(), str(r));
    r = engine.create_object(kComm, x.b);
    TCHECK(failures, r.ok(), str(r));
    r = engine.create_keyval(test_spec(kComm, CopyAction::NullCopy, nullptr, DeleteAction::User,
                                       plain_delete, &plain_b[tid]),
                             &x.k_b);
    TCHECK(failures, r.ok(), str(r));
    r = engine.create_keyval(test_spec(kComm, CopyAction::NullCopy, nullptr, DeleteAction::User,
                                       plain_delete, &plain_sink[tid]),
                             &x.k_sink);
    TCHECK(failures, r.ok(), str(r));
    r = engine.create_keyval(test_spec(kComm, CopyAction::User, reentrant_copy,
                                       DeleteAction::User, reentrant_delete, &x),
                             &k_re[tid]);
    TCHECK(failures, r.ok(), str(r));
    const KeyvalId k = k_re[tid];

    for (int i = 0; i < iters; ++i) {
      const Handle a2 = own_handle(tid, 2 + static_cast<std::uint64_t>(i));
      r = engine.set_attr(kComm, x.a, k, Binding::C, own_value(tid, x.serial.fetch_add(1)));
      TCHECK(failures, r.ok(), "set: " << str(r));
      r = engine.set_attr(kComm, x.a, k, Binding::C, own_value(tid, x.serial.fetch_add(1)));
      TCHECK(failures, r.ok(), "replace (cause Set): " << str(r));
      r = engine.dup_object(kComm, x.a, a2);
      TCHECK(failures, r.ok(), "dup (cause Dup): " << str(r));
      r = engine.free_object(kComm, a2);
      TCHECK(failures, r.ok(), "free (cause Free): " << str(r));
      r = engine.delete_attr(kComm, x.a, k);
      TCHECK(failures, r.ok(), "delete (cause Delete): " << str(r));
    }
  };
  run_threads(kThreads, thread_main);

  // Free what is left: every b (one attribute each) and the sink (one per thread).
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(engine.free_object(kComm, ctx[t].a).status, Status::Ok);
    EXPECT_EQ(engine.free_object(kComm, ctx[t].b).status, Status::Ok);
  }
  observer.arm(nullptr, 0, 0, &failures);
  EXPECT_EQ(engine.free_object(kComm, sink).status, Status::Ok);

  long reentrant_deletes = 0;
  long plain_deletes = 0;
  long copies = 0;
  for (int t = 0; t < kThreads; ++t) {
    const ReCtx& x = ctx[t];
    EXPECT_EQ(x.deletes_by_cause[static_cast<std::size_t>(CallbackCause::Set)].load(), iters);
    EXPECT_EQ(x.deletes_by_cause[static_cast<std::size_t>(CallbackCause::Free)].load(), iters);
    EXPECT_EQ(x.deletes_by_cause[static_cast<std::size_t>(CallbackCause::Delete)].load(), iters);
    EXPECT_EQ(x.deletes_by_cause[static_cast<std::size_t>(CallbackCause::Dup)].load(), 0);
    EXPECT_EQ(x.deletes_by_cause[static_cast<std::size_t>(CallbackCause::DupRollback)].load(), 0);
    EXPECT_EQ(x.copies.load(), iters);
    EXPECT_EQ(x.refused.load(), 7L * iters);
    EXPECT_EQ(x.b_sets.load(), 8L * iters);
    EXPECT_EQ(x.sink_sets.load(), 4L * iters);
    // Every value set on b and on the sink was deleted exactly once (replaced or freed).
    EXPECT_EQ(plain_b[t].deletes.load(), x.b_sets.load()) << "thread " << t;
    EXPECT_EQ(plain_sink[t].deletes.load(), x.sink_sets.load()) << "thread " << t;
    for (const auto& c : x.deletes_by_cause) reentrant_deletes += c.load();
    plain_deletes += plain_b[t].deletes.load() + plain_sink[t].deletes.load();
    copies += x.copies.load();
  }
  EXPECT_EQ(observer.deletes.load(), reentrant_deletes + plain_deletes);
  EXPECT_EQ(observer.copies.load(), copies);
  EXPECT_EQ(observer.bad.load(), 0);

  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(engine.free_keyval(kComm, &k_re[t]).status, Status::Ok);
    EXPECT_EQ(engine.free_keyval(kComm, &ctx[t].k_b).status, Status::Ok);
    EXPECT_EQ(engine.free_keyval(kComm, &ctx[t].k_sink).status, Status::Ok);
  }
  EXPECT_EQ(engine.free_keyval(kComm, &probe).status, Status::Ok);
  EXPECT_TRUE(engine.live_keyvals().empty());
  EXPECT_TRUE(engine.attributes().empty());
  EXPECT_TRUE(engine.objects().empty());
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// ---------------------------------------------------------------------------------------------
// 4. A callback blocks until *another* thread has completed modifying engine calls. Passes only
//    if no engine lock (recursive or not) is held while a callback runs, for each cause.
// ---------------------------------------------------------------------------------------------

struct HandshakeCtx {
  std::atomic<bool> armed{false};
  std::atomic<int> round{0};
  std::atomic<int> in_callback{0};  // the round whose callback is waiting
  std::atomic<int> helper_done{0};  // the round the helper has finished
  std::atomic<long> waited{0};
  std::array<std::atomic<long>, kCauses> by_cause{};
};

void handshake(HandshakeCtx* h, int cause) {
  if (!h->armed.load()) return;
  const int round = h->round.load();
  h->in_callback.store(round);
  while (h->helper_done.load() != round) std::this_thread::yield();  // watchdog bounds this
  h->waited.fetch_add(1);
  h->by_cause[static_cast<std::size_t>(cause)].fetch_add(1);
}
int handshake_delete(const DeleteCall& call) {
  handshake(ctx_from<HandshakeCtx>(call.extra_state), static_cast<int>(call.cause));
  return 0;
}
int handshake_copy(const CopyCall& call, std::uint64_t* value_out, int* flag) {
  handshake(ctx_from<HandshakeCtx>(call.extra_state), static_cast<int>(CallbackCause::Dup));
  *value_out = call.value_in;
  *flag = 1;
  return 0;
}

TEST_F(EngineThreads, CallbackWaitsForAnotherThreadsModifications) {
  constexpr int kPairs = 2;  // 4 threads: a holder and a helper per pair
  const int rounds = scaled(8000);
  constexpr ObjectKind kComm = ObjectKind::Comm;

  TestInvoker invoker;
  EngineConfig config;
  config.invoker = &invoker;
  Engine engine(config);
  Failures failures;
  std::array<HandshakeCtx, kPairs> hs;
  std::array<long, kPairs> helper_ops{};

  auto holder = [&](int pair) {
    HandshakeCtx& h = hs[pair];
    const int tid = 2 * pair;
    KeyvalId k = 0;
    Result r = engine.create_keyval(test_spec(kComm, CopyAction::User, handshake_copy,
                                              DeleteAction::User, handshake_delete, &h),
                                    &k);
    TCHECK(failures, r.ok(), str(r));
    const Handle obj = own_handle(tid, 0);
    const Handle dup = own_handle(tid, 1);
    r = engine.create_object(kComm, obj);
    TCHECK(failures, r.ok(), str(r));
    std::uint64_t serial = 0;
    bool set = false;
    auto ensure_set = [&] {
      if (!set) {
        const Result rr = engine.set_attr(kComm, obj, k, Binding::C, own_value(tid, serial++));
        TCHECK(failures, rr.ok(), str(rr));
        set = true;
      }
    };
    for (int round = 1; round <= rounds; ++round) {
      h.round.store(round);
      ensure_set();
      switch (round % 4) {
        case 0:  // Set: replacing runs the delete callback
          h.armed.store(true);
          r = engine.set_attr(kComm, obj, k, Binding::C, own_value(tid, serial++));
          h.armed.store(false);
          TCHECK(failures, r.ok(), "replace: " << str(r));
          break;
        case 1:  // Delete
          h.armed.store(true);
          r = engine.delete_attr(kComm, obj, k);
          h.armed.store(false);
          TCHECK(failures, r.ok(), "delete: " << str(r));
          set = false;
          break;
        case 2:  // Dup: the copy callback
          h.armed.store(true);
          r = engine.dup_object(kComm, obj, dup);
          h.armed.store(false);
          TCHECK(failures, r.ok(), "dup: " << str(r));
          r = engine.free_object(kComm, dup);
          TCHECK(failures, r.ok(), "free dup: " << str(r));
          break;
        default:  // Free: the delete callback of the dup's copy
          r = engine.dup_object(kComm, obj, dup);
          TCHECK(failures, r.ok(), "dup: " << str(r));
          h.armed.store(true);
          r = engine.free_object(kComm, dup);
          h.armed.store(false);
          TCHECK(failures, r.ok(), "free dup: " << str(r));
          break;
      }
    }
    r = engine.free_object(kComm, obj);
    TCHECK(failures, r.ok(), str(r));
    r = engine.free_keyval(kComm, &k);
    TCHECK(failures, r.ok(), str(r));
  };

  auto helper = [&](int pair) {
    HandshakeCtx& h = hs[pair];
    const int tid = 2 * pair + 1;
    std::uint64_t serial = 0;
    long n = 0;
    for (int round = 1; round <= rounds; ++round) {
      while (h.in_callback.load() != round) std::this_thread::yield();  // watchdog bounds this
      // Every kind of modifying call, on this thread's own keyval and objects.
      KeyvalId k = 0;
      Result r = engine.create_keyval(test_spec(kComm, CopyAction::Dup, nullptr,
                                                DeleteAction::NullDelete, nullptr, nullptr),
                                      &k);
      TCHECK(failures, r.ok(), "helper create_keyval: " << str(r));
      const Handle o = own_handle(tid, serial++);
      const Handle o2 = own_handle(tid, serial++);
      r = engine.create_object(kComm, o);
      TCHECK(failures, r.ok(), "helper create_object: " << str(r));
      const std::uint64_t v = own_value(tid, serial++);
      r = engine.set_attr(kComm, o, k, Binding::C, v);
      TCHECK(failures, r.ok(), "helper set: " << str(r));
      r = engine.dup_object(kComm, o, o2);
      TCHECK(failures, r.ok(), "helper dup: " << str(r));
      const Got g = get_c(engine, kComm, o2, k);
      TCHECK(failures, g.r.ok() && g.flag == 1 && g.value == v, "helper get: " << str(g.r));
      r = engine.delete_attr(kComm, o, k);
      TCHECK(failures, r.ok(), "helper delete: " << str(r));
      r = engine.free_object(kComm, o2);
      TCHECK(failures, r.ok(), "helper free dup: " << str(r));
      r = engine.free_object(kComm, o);
      TCHECK(failures, r.ok(), "helper free: " << str(r));
      r = engine.free_keyval(kComm, &k);
      TCHECK(failures, r.ok(), "helper free_keyval: " << str(r));
      n += 10;
      h.helper_done.store(round);
    }
    helper_ops[pair] = n;
  };

  run_threads(2 * kPairs, [&](int t) {
    if (t % 2 == 0) {
      holder(t / 2);
    } else {
      helper(t / 2);
    }
  });

  for (int p = 0; p < kPairs; ++p) {
    EXPECT_EQ(hs[p].waited.load(), rounds);
    EXPECT_EQ(helper_ops[p], 10L * rounds);
    const auto count = [&](CallbackCause c) {
      return hs[p].by_cause[static_cast<std::size_t>(c)].load();
    };
    EXPECT_EQ(count(CallbackCause::Set), rounds / 4);
    EXPECT_EQ(count(CallbackCause::Delete), (rounds + 3) / 4);
    EXPECT_EQ(count(CallbackCause::Dup), (rounds + 2) / 4);
    EXPECT_EQ(count(CallbackCause::Free), (rounds + 1) / 4);
  }
  EXPECT_TRUE(engine.live_keyvals().empty());
  EXPECT_TRUE(engine.objects().empty());
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

// ---------------------------------------------------------------------------------------------
// 6. Two threads per attribute racing to set and delete the same attribute of one shared object
//    while its delete callback is slow; a reader checks every value it sees.
// ---------------------------------------------------------------------------------------------

struct RaceCtx {
  InstanceRegistry* registry = nullptr;
  Failures* failures = nullptr;
  std::atomic<int> in_flight{0};
  std::atomic<long> overlaps{0};
  std::atomic<long> deletes{0};
};
int slow_delete(Handle, int, void* attribute_val, void* extra_state) {
  auto* c = static_cast<RaceCtx*>(extra_state);
  if (c->in_flight.fetch_add(1) != 0) c->overlaps.fetch_add(1);
  c->registry->on_delete(as_word(attribute_val), "slow_delete");
  spin(200);
  c->in_flight.fetch_sub(1);
  c->deletes.fetch_add(1);
  return 0;
}

TEST_F(EngineThreads, RacingSetDeleteOnOneAttributeWithSlowDelete) {
  constexpr int kKeys = 2;
  constexpr int kRacersPerKey = 2;
  constexpr int kRacers = kKeys * kRacersPerKey;  // + 1 reader = 5 threads
  const int iters = scaled(10000);
  constexpr ObjectKind kComm = ObjectKind::Comm;

  Engine engine;
  Failures failures;
  InstanceRegistry registry(static_cast<std::size_t>(kRacers) * static_cast<std::size_t>(iters) + 16,
                            &failures);
  const Handle shared = kSharedBase + 3;
  ASSERT_EQ(engine.create_object(kComm, shared).status, Status::Ok);
  std::array<RaceCtx, kKeys> ctx;
  std::array<KeyvalId, kKeys> key{};
  for (int k = 0; k < kKeys; ++k) {
    ctx[k].registry = &registry;
    ctx[k].failures = &failures;
    ASSERT_EQ(engine
                  .create_keyval(native_spec(kComm, CopyAction::NullCopy, nullptr,
                                             DeleteAction::User, slow_delete, &ctx[k]),
                                 &key[k])
                  .status,
              Status::Ok);
  }
  std::atomic<int> racers_done{0};
  std::array<long, kRacers> sets{};
  std::array<long, kRacers> deletes_ok{};
  std::atomic<long> reads{0};

  auto racer = [&](int tid) {
    const int k = tid % kKeys;
    Rng rng(0x4ACE00ULL + static_cast<std::uint64_t>(tid));
    for (int i = 0; i < iters; ++i) {
      const std::uint64_t id = registry.allocate(static_cast<std::uint8_t>(k));
      const Result r =
          engine.set_attr(kComm, shared, key[k], Binding::C, InstanceRegistry::encode(id));
      TCHECK(failures, r.ok(), "racing set: " << str(r));
      registry.set_state(id, r.ok() ? InstanceRegistry::kLive : InstanceRegistry::kRejected);
      if (r.ok()) ++sets[tid];
      if (rng.below(2) == 0) {
        const Result d = engine.delete_attr(kComm, shared, key[k]);
        TCHECK(failures, d.ok() || d.status == Status::AttrAbsent, "racing delete: " << str(d));
        if (d.ok()) ++deletes_ok[tid];
      }
    }
    racers_done.fetch_add(1);
  };
  auto reader = [&] {
    while (racers_done.load() < kRacers) {
      for (int k = 0; k < kKeys; ++k) {
        const Got g = get_c(engine, kComm, shared, key[k]);
        TCHECK(failures, g.r.ok() && (g.flag == 0 || g.flag == 1), "racing get: " << str(g.r));
        if (g.r.ok() && g.flag == 1) {
          std::uint64_t id = 0;
          const bool known = registry.decode(g.value, &id);
          TCHECK(failures, known, "racing get returned " << hex(g.value));
          if (known) {
            TCHECK(failures, registry.tag(id) == k,
                   "key " << k << " returned a value of key " << int(registry.tag(id)));
          }
        }
        reads.fetch_add(1, std::memory_order_relaxed);
      }
      // Leave the racers (and their slow callbacks) CPU time on a 2-core machine.
      if ((reads.load(std::memory_order_relaxed) & 31) == 0) std::this_thread::yield();
    }
  };
  run_threads(kRacers + 1, [&](int tid) {
    if (tid == kRacers) {
      reader();
    } else {
      racer(tid);
    }
  });

  // Final state: per key, at most one value not yet deleted, and it is the one the engine holds.
  std::size_t present = 0;
  for (int k = 0; k < kKeys; ++k) {
    const Got g = get_c(engine, kComm, shared, key[k]);
    ASSERT_TRUE(g.r.ok()) << str(g.r);
    long undeleted = 0;
    std::uint64_t undeleted_id = 0;
    for (std::uint64_t id = 0; id < registry.allocated(); ++id) {
      if (registry.tag(id) == k && registry.deletes(id) == 0) {
        ++undeleted;
        undeleted_id = id;
      }
    }
    EXPECT_EQ(undeleted, g.flag) << "key " << k;
    if (g.flag == 1) {
      ++present;
      EXPECT_EQ(g.value, InstanceRegistry::encode(undeleted_id)) << "key " << k;
    }
  }
  EXPECT_EQ(engine.attributes(kComm, shared).size(), present);
  long total_sets = 0;
  long total_deletes_ok = 0;
  for (int t = 0; t < kRacers; ++t) {
    total_sets += sets[t];
    total_deletes_ok += deletes_ok[t];
  }
  long callbacks_before_free = 0;
  for (const RaceCtx& c : ctx) callbacks_before_free += c.deletes.load();
  // Every set's predecessor was deleted once (by a replace or a delete), the survivors not yet.
  EXPECT_EQ(callbacks_before_free, total_sets - static_cast<long>(present));
  EXPECT_LE(total_deletes_ok, callbacks_before_free);

  ASSERT_EQ(engine.free_object(kComm, shared).status, Status::Ok);
  const long live = registry.verify_all_deleted_once("racing set/delete");
  EXPECT_EQ(live, static_cast<long>(kRacers) * iters);
  long callbacks = 0;
  for (const RaceCtx& c : ctx) {
    callbacks += c.deletes.load();
    // A delete callback for an attribute never overlaps another one for the same attribute:
    // a modification of it waits until the running callback has returned.
    EXPECT_EQ(c.overlaps.load(), 0);
  }
  EXPECT_EQ(callbacks, total_sets);
  for (KeyvalId& k : key) EXPECT_EQ(engine.free_keyval(kComm, &k).status, Status::Ok);
  EXPECT_TRUE(engine.live_keyvals().empty());
  EXPECT_EQ(failures.count(), 0) << failures.report();
}

}  // namespace
