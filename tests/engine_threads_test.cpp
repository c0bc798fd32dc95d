// Multi-threaded stress tests of the cache engine (MPI_THREAD_MULTIPLE semantics).
//
// Every test is built so that its final state can be checked exactly: values are drawn from a
// known set (or encode a unique instance id with a check word), each callback counts into
// atomics, and the test keeps its own model of what the engine must contain. No timing
// thresholds anywhere: the only clock is a watchdog that aborts a test that deadlocks (a
// callback that calls into the engine would deadlock if an engine lock were held around it).
//
// CI runs this file under ThreadSanitizer; all shared state in the test code itself is atomic or
// mutex-guarded. Iteration counts are scaled down under sanitizers.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "attrcheck/engine.hpp"

// Readable gtest output for the engine's enums (found by ADL).
namespace attrcheck {
static void PrintTo(Status status, std::ostream* os) { *os << to_string(status); }
}  // namespace attrcheck

namespace {

using namespace attrcheck;

// ---------------------------------------------------------------------------------------------
// Scale and watchdog
// ---------------------------------------------------------------------------------------------

#if defined(__SANITIZE_THREAD__)
#define ATTRCHECK_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ATTRCHECK_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ATTRCHECK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTRCHECK_TEST_ASAN 1
#endif
#endif

#if defined(ATTRCHECK_TEST_TSAN)
constexpr int kDiv = 4;  // TSan: ~5-15x slower, and CI has 2 cores
constexpr int kWatchdogSeconds = 120;
#elif defined(ATTRCHECK_TEST_ASAN)
constexpr int kDiv = 2;
constexpr int kWatchdogSeconds = 90;
#else
constexpr int kDiv = 1;
constexpr int kWatchdogSeconds = 60;
#endif

constexpr int scaled(int n) { return n / kDiv > 0 ? n / kDiv : 1; }

// Progress: every callback's spin() counts here. A deadlock (an engine lock held while a callback
// calls back in) stops it; a machine so loaded that the threads hardly get a core (their
// spin()s yield, and each yield can wait for every other runnable process) only slows it down.
std::atomic<std::uint64_t> g_progress{0};

// Aborts the process (with a message) once the test has made no progress for `seconds` (the only
// way a deadlock shows up), or has not finished after kRunawayFactor times that although it
// progresses (a livelock). Time alone would take a starved test for a deadlocked one.
class Watchdog {
 public:
  static constexpr int kRunawayFactor = 20;
  Watchdog(std::string what, int seconds) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      using Clock = std::chrono::steady_clock;
      const Clock::time_point start = Clock::now();
      Clock::time_point last_change = start;
      std::uint64_t last = g_progress.load();
      std::unique_lock<std::mutex> lock(mutex_);
      while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) {
        const Clock::time_point now = Clock::now();
        const std::uint64_t p = g_progress.load();
        if (p != last) {
          last = p;
          last_change = now;
        }
        const bool stalled = now - last_change >= std::chrono::seconds(seconds);
        if (!stalled && now - start < std::chrono::seconds(seconds) * kRunawayFactor) continue;
        const char* why = stalled ? "made no progress for" : "progresses but has not finished after";
        const long waited = static_cast<long>(
            std::chrono::duration_cast<std::chrono::seconds>(now - (stalled ? last_change : start)).count());
        std::fprintf(stderr,
                     "\n[watchdog] %s %s %ld s: deadlock? (is an engine lock held while a user "
                     "callback runs?)\n",
                     what_.c_str(), why, waited);
        std::fflush(stderr);
        std::abort();
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string current_test_name() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "engine_threads_test";
  return std::string(info->test_suite_name()) + "." + info->name();
}

// Every test runs under a watchdog.
class EngineThreads : public ::testing::Test {
 protected:
  EngineThreads() : watchdog_(current_test_name(), kWatchdogSeconds) {}
  Watchdog watchdog_;
};

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

// Failures seen on worker threads and inside callbacks: counted, the first few kept verbatim,
// asserted on the main thread at the end (so a systematic bug does not flood the log).
class Failures {
 public:
  void add(std::string message) {
    if (count_.fetch_add(1) < kKeep) {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.push_back(std::move(message));
    }
  }
  long count() const { return count_.load(); }
  std::string report() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (const std::string& m : messages_) out += "\n  " + m;
    if (count_.load() > kKeep) out += "\n  ...";
    return out;
  }

 private:
  static constexpr long kKeep = 16;
  std::atomic<long> count_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

#define TCHECK(failures, cond, details)                                         \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::ostringstream tcheck_os_;                                            \
      tcheck_os_ << "line " << __LINE__ << ": " #cond " -- " << details;        \
      (failures).add(tcheck_os_.str());                                         \
    }                                                                           \
  } while (0)

std::string str(Result r) {
  std::string s = to_string(r.status);
  if (r.status == Status::CallbackFailed) s += "(" + std::to_string(r.callback_rc) + ")";
  return s;
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

inline void* as_ptr(std::uint64_t v) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(v));
}
inline std::uint64_t as_word(const void* p) {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
}
template <class Fn>
void* fn_ptr(Fn fn) {
  return reinterpret_cast<void*>(fn);
}
template <class T>
T* ctx_from(std::uint64_t extra_state) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(extra_state));
}
// Writes a C copy callback's output word.
inline void write_out(void* attribute_val_out, std::uint64_t v) {
  void* p = as_ptr(v);
  std::memcpy(attribute_val_out, &p, sizeof p);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

// Burns a little time inside a callback (and gives other threads a chance to run into it).
void spin(int iterations) {
  std::atomic<unsigned> sink{0};
  iterations /= kDiv;  // sanitizers make each iteration much slower
  for (int i = 0; i < iterations; ++i) sink.fetch_add(1, std::memory_order_relaxed);
  g_progress.fetch_add(1, std::memory_order_relaxed);
  std::this_thread::yield();
}

class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation != generation_; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int parties_;
  int arrived_ = 0;
  long generation_ = 0;
};

template <class Fn>
void run_threads(int n, Fn&& fn) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int t = 0; t < n; ++t) threads.emplace_back([&fn, t] { fn(t); });
  for (std::thread& th : threads) th.join();
}

struct Got {
  Result r;
  int flag;
  std::uint64_t value;
};
Got get_c(const Engine& engine, ObjectKind kind, Handle handle, KeyvalId keyval) {
  void* out = nullptr;
  int flag = -1;
  const Result r = engine.get_attr(kind, handle, keyval, Binding::C, &out, &flag);
  return {r, flag, as_word(out)};
}

// A thread's own handles: never 0 (the null handle), never shared.
Handle own_handle(int tid, std::uint64_t serial) {
  return (static_cast<Handle>(tid + 1) << 40) | (serial + 1);
}
constexpr Handle kSharedBase = 0x7FFF000000000000ULL;

KeyvalSpec native_spec(ObjectKind kind, CopyAction copy, NativeCopyFn copy_fn, DeleteAction del,
                       NativeDeleteFn del_fn, const void* extra) {
  KeyvalSpec spec;
  spec.kind = kind;
  spec.copy.action = copy;
  spec.copy.fn = copy == CopyAction::User ? fn_ptr(copy_fn) : nullptr;
  spec.del.action = del;
  spec.del.fn = del == DeleteAction::User ? fn_ptr(del_fn) : nullptr;
  spec.extra_state = as_word(extra);
  return spec;
}

// Tracks attribute value instances: each value set (or produced by a copy callback) is a unique
// id encoded with a check word, so a garbage or torn value is recognised, and its delete
// callback must run exactly once by the end of the test.
class InstanceRegistry {
 public:
  enum : std::uint8_t { kUnused = 0, kPending = 1, kLive = 2, kRejected = 3 };

  InstanceRegistry(std::size_t capacity, Failures* failures)
      : capacity_(capacity),
        state_(new std::atomic<std::uint8_t>[capacity]()),
        deletes_(new std::atomic<std::uint8_t>[capacity]()),
        tag_(new std::atomic<std::uint8_t>[capacity]()),
        failures_(failures) {}

  // A new instance in state kPending with a caller-defined tag.
  std::uint64_t allocate(std::uint8_t tag) {
    const std::uint64_t id = next_.fetch_add(1);
    if (id >= capacity_) {
      std::fprintf(stderr, "InstanceRegistry capacity %zu exceeded (test bug)\n", capacity_);
      std::abort();
    }
    tag_[id].store(tag);
    state_[id].store(kPending);
    return id;
  }
  void set_state(std::uint64_t id, std::uint8_t state) { state_[id].store(state); }

  static std::uint64_t encode(std::uint64_t id) {
    return (0xA5ULL << 56) | (id << 16) | check_word(id);
  }
  // The id of a value produced by encode(), or false for anything else.
  bool decode(std::uint64_t value, std::uint64_t* id) const {
    if ((value >> 56) != 0xA5) return false;
    const std::uint64_t i = (value >> 16) & ((1ULL << 40) - 1);
    if ((value & 0xFFFF) != check_word(i)) return false;
    if (i >= next_.load() || i >= capacity_) return false;
    if (state_[i].load() == kUnused) return false;
    *id = i;
    return true;
  }

  std::uint8_t tag(std::uint64_t id) const { return tag_[id].load(); }
  std::uint8_t state(std::uint64_t id) const { return state_[id].load(); }
  int deletes(std::uint64_t id) const { return deletes_[id].load(); }

  // Called from delete callbacks.
  void on_delete(std::uint64_t value, const char* where) {
    std::uint64_t id = 0;
    if (!decode(value, &id)) {
      TCHECK(*failures_, false, where << ": delete callback got an unknown value " << hex(value));
      return;
    }
    const int before = deletes_[id].fetch_add(1);
    TCHECK(*failures_, before == 0,
           where << ": delete callback ran " << before + 1 << " times for instance " << id);
    const std::uint8_t st = state_[id].load();
    TCHECK(*failures_, st == kPending || st == kLive,
           where << ": delete callback for instance " << id << " in state " << int(st));
  }
  // The value must name an instance that exists and has not been deleted.
  bool check_alive(std::uint64_t value, const char* where) {
    std::uint64_t id = 0;
    if (!decode(value, &id)) {
      TCHECK(*failures_, false, where << ": unknown value " << hex(value));
      return false;
    }
    TCHECK(*failures_, deletes_[id].load() == 0,
           where << ": instance " << id << " was already deleted");
    return true;
  }

  std::uint64_t allocated() const { return std::min<std::uint64_t>(next_.load(), capacity_); }

  // End of test: every live instance deleted exactly once, every rejected one never.
  // Returns the number of live instances.
  long verify_all_deleted_once(const char* where) {
    long live = 0;
    for (std::uint64_t id = 0; id < allocated(); ++id) {
      const std::uint8_t st = state_[id].load();
      const int d = deletes_[id].load();
      if (st == kLive) {
        ++live;
        TCHECK(*failures_, d == 1,
               where << ": instance " << id << " (tag " << int(tag_[id].load())
                     << ") deleted " << d << " times, expected exactly once");
      } else if (st == kRejected) {
        TCHECK(*failures_, d == 0,
               where << ": rejected instance " << id << " deleted " << d << " times");
      } else {
        TCHECK(*failures_, false, where << ": instance " << id << " left in state " << int(st));
      }
    }
    return live;
  }

 private:
  static std::uint64_t check_word(std::uint64_t id) { return (id * 0x9E37ULL + 0x5A5AULL) & 0xFFFF; }

  std::size_t capacity_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> state_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> deletes_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> tag_;
  std::atomic<std::uint64_t> next_{0};
  Failures* failures_;
};

// ---------------------------------------------------------------------------------------------
// 1. Each thread owns objects and keyvals and cycles them, while all threads read a shared
//    object whose attributes a writer thread keeps replacing and deleting.
// ---------------------------------------------------------------------------------------------

constexpr int kSharedKeys = 4;
constexpr int kSharedValuesPerKey = 8;

// Value m of shared key j: a 64-bit word whose halves check each other, so a torn read of two
// different values, or a value of another key, is recognised.
std::uint64_t shared_value(int key, int m) {
  const std::uint64_t tag = static_cast<std::uint64_t>(key * kSharedValuesPerKey + m + 1);
  return (tag << 32) | (~tag & 0xFFFFFFFFULL);
}
bool shared_value_ok(int key, std::uint64_t v) {
  const std::uint64_t hi = v >> 32;
  const std::uint64_t lo = v & 0xFFFFFFFFULL;
  if (hi == 0 || lo != (~hi & 0xFFFFFFFFULL)) return false;
  return (hi - 1) / kSharedValuesPerKey == static_cast<std::uint64_t>(key);
}

struct SharedKeyCtx {
  Failures* failures = nullptr;
  int key = 0;
  std::atomic<long> deletes{0};
};
int shared_delete(Handle, int, void* attribute_val, void* extra_state) {
  auto* c = static_cast<SharedKeyCtx*>(extra_state);
  TCHECK(*c->failures, shared_value_ok(c->key, as_word(attribute_val)),
         "shared delete callback got " << hex(as_word(attribute_val)));
  c->deletes.fetch_add(1);
  return 0;
}

constexpr std::uint64_t kOwnTag = 0x0B;
constexpr std::uint64_t kCopyFlip = 0x04;  // a user copy callback flips this bit of the top byte

std::uint64_t own_value(int tid, std::uint64_t serial) {
  return (kOwnTag << 56) | (static_cast<std::uint64_t>(tid) << 40) | (serial & 0xFFFFFFFFFFULL);
}
bool own_value_ok(int tid, std::uint64_t v) {
  const std::uint64_t top = v >> 56;
  return (top == kOwnTag || top == (kOwnTag ^ kCopyFlip)) &&
         ((v >> 40) & 0xFFFF) == static_cast<std::uint64_t>(tid);
}

struct OwnCtx {
  Failures* failures = nullptr;
  int tid = 0;
  std::atomic<long> deletes{0};
  std::atomic<long> copies{0};
};
int own_delete(Handle, int, void* attribute_val, void* extra_state) {
  auto* c = static_cast<OwnCtx*>(extra_state);
  TCHECK(*c->failures, own_value_ok(c->tid, as_word(attribute_val)),
         "thread " << c->tid << " delete callback got " << hex(as_word(attribute_val)));
  c->deletes.fetch_add(1);
  return 0;
}
int own_copy(Handle, int, void* extra_state, void* attribute_val_in, void* attribute_val_out,
             int* flag) {
  auto* c = static_cast<OwnCtx*>(extra_state);
  const std::uint64_t in = as_word(attribute_val_in);
  TCHECK(*c->failures, own_value_ok(c->tid, in),
         "thread " << c->tid << " copy callback got " << hex(in));
  write_out(attribute_val_out, in ^ (kCopyFlip << 56));
  *flag = 1;
  c->copies.fetch_add(1);
  return 0;
}

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
// 2. Keyvals created by the main thread, used by every thread on its own objects, then freed by
//    the main thread while attributes still use them. Every attribute instance (set or copied)
//    gets exactly one delete callback; the freed keyvals die with their last attribute.
// ---------------------------------------------------------------------------------------------

struct InstKeyCtx {
  InstanceRegistry* registry = nullptr;
  Failures* failures = nullptr;
  KeyvalId id = 0;
  std::atomic<long> deletes{0};
  std::atomic<long> copies{0};
};
constexpr std::uint8_t kTagSet = 0;
constexpr std::uint8_t kTagCopy = 1;

int inst_delete(Handle, int keyval, void* attribute_val, void* extra_state) {
  auto* c = static_cast<InstKeyCtx*>(extra_state);
  TCHECK(*c->failures, keyval == c->id, "delete callback keyval " << keyval << " != " << c->id);
  c->registry->on_delete(as_word(attribute_val), "inst_delete");
  c->deletes.fetch_add(1);
  return 0;
}
// Copies an instance as a fresh instance (so every attribute on every object is unique).
int inst_copy(Handle, int keyval, void* extra_state, void* attribute_val_in,
              void* attribute_val_out, int* flag) {
  auto* c = static_cast<InstKeyCtx*>(extra_state);
  TCHECK(*c->failures, keyval == c->id, "copy callback keyval " << keyval << " != " << c->id);
  // The attribute being copied cannot be deleted while its copy callback runs.
  c->registry->check_alive(as_word(attribute_val_in), "inst_copy");
  const std::uint64_t id = c->registry->allocate(kTagCopy);
  c->registry->set_state(id, InstanceRegistry::kLive);
  write_out(attribute_val_out, InstanceRegistry::encode(id));
  *flag = 1;
  c->copies.fetch_add(1);
  return 0;
}

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
  for (int k = 0; k < kKeys; ++k) {
    key_ctx[k].registry = &registry;
    key_ctx[k].failures = &failures;
    ASSERT_EQ(engine
                  .create_keyval(native_spec(kComm, CopyAction::User, inst_copy,
                                             DeleteAction::User, inst_delete, &key_ctx[k]),
                                 &key[k])
                  .status,
              Status::Ok);
    key_ctx[k].id = key[k];
  }
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
// 3. Slow callbacks that call back into the engine: a get on their own object, a refused
//    (Reentrant) set/delete on it, and sets on other objects -- one per thread and one shared by
//    all threads. An observer also calls into the engine. Would deadlock if any engine lock were
//    held around a callback.
// ---------------------------------------------------------------------------------------------

using TestCopyFn = int (*)(const CopyCall&, std::uint64_t*, int*);
using TestDeleteFn = int (*)(const DeleteCall&);

// Dispatches to test functions that see the whole call (cause included).
class TestInvoker final : public CallbackInvoker {
 public:
  int copy(const CopyCall& call, std::uint64_t* value_out, int* flag) override {
    return reinterpret_cast<TestCopyFn>(call.fn)(call, value_out, flag);
  }
  int del(const DeleteCall& call) override { return reinterpret_cast<TestDeleteFn>(call.fn)(call); }
};

KeyvalSpec test_spec(ObjectKind kind, CopyAction copy, TestCopyFn copy_fn, DeleteAction del,
                     TestDeleteFn del_fn, const void* extra) {
  KeyvalSpec spec;
  spec.kind = kind;
  spec.copy.action = copy;
  spec.copy.fn = copy == CopyAction::User ? fn_ptr(copy_fn) : nullptr;
  spec.del.action = del;
  spec.del.fn = del == DeleteAction::User ? fn_ptr(del_fn) : nullptr;
  spec.extra_state = as_word(extra);
  return spec;
}

constexpr int kCauses = 6;
constexpr int kCallbackSpin = 150;

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
  for (int k = 0; k < kInstKeys; ++k) {
    key_ctx[k].registry = &registry;
    key_ctx[k].failures = &failures;
    ASSERT_EQ(engine
                  .create_keyval(native_spec(kComm, CopyAction::User, inst_copy,
                                             DeleteAction::User, inst_delete, &key_ctx[k]),
                                 &key[k])
                  .status,
              Status::Ok);
    key_ctx[k].id = key[k];
  }
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

}  // namespace
