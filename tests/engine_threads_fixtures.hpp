// Shared infrastructure of the engine's multi-threaded stress tests (engine_threads_*_test.cpp):
// scale and watchdog, failure collection, value vocabularies and callbacks, thread helpers.
//
// Every test is built so that its final state can be checked exactly: values are drawn from a
// known set (or encode a unique instance id with a check word), each callback counts into
// atomics, and the test keeps its own model of what the engine must contain. No timing
// thresholds anywhere: the only clock is a watchdog that aborts a test that deadlocks (a
// callback that calls into the engine would deadlock if an engine lock were held around it).
//
// CI runs these suites under ThreadSanitizer; all shared state in the test code itself is atomic
// or mutex-guarded. Iteration counts are scaled down under sanitizers.
#pragma once

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
inline void PrintTo(Status status, std::ostream* os) { *os << to_string(status); }
}  // namespace attrcheck

namespace engine_threads_fixtures {

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
inline std::atomic<std::uint64_t> g_progress{0};

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

inline std::string current_test_name() {
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

inline std::string str(Result r) {
  std::string s = to_string(r.status);
  if (r.status == Status::CallbackFailed) s += "(" + std::to_string(r.callback_rc) + ")";
  return s;
}

inline std::string hex(std::uint64_t v) {
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
inline void spin(int iterations) {
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
inline Got get_c(const Engine& engine, ObjectKind kind, Handle handle, KeyvalId keyval) {
  void* out = nullptr;
  int flag = -1;
  const Result r = engine.get_attr(kind, handle, keyval, Binding::C, &out, &flag);
  return {r, flag, as_word(out)};
}

// A thread's own handles: never 0 (the null handle), never shared.
inline Handle own_handle(int tid, std::uint64_t serial) {
  return (static_cast<Handle>(tid + 1) << 40) | (serial + 1);
}
constexpr Handle kSharedBase = 0x7FFF000000000000ULL;

// A keyval's spec with user callbacks of either signature: the engine-native ones (native_spec,
// called by the default NativeInvoker) or ones that see the whole call (test_spec, TestInvoker).
template <class CopyFn, class DeleteFn>
KeyvalSpec spec_of(ObjectKind kind, CopyAction copy, CopyFn copy_fn, DeleteAction del, DeleteFn del_fn,
                   const void* extra) {
  KeyvalSpec spec;
  spec.kind = kind;
  spec.copy.action = copy;
  spec.copy.fn = copy == CopyAction::User ? fn_ptr(copy_fn) : nullptr;
  spec.del.action = del;
  spec.del.fn = del == DeleteAction::User ? fn_ptr(del_fn) : nullptr;
  spec.extra_state = as_word(extra);
  return spec;
}
inline KeyvalSpec native_spec(ObjectKind kind, CopyAction copy, NativeCopyFn copy_fn, DeleteAction del,
                              NativeDeleteFn del_fn, const void* extra) {
  return spec_of(kind, copy, copy_fn, del, del_fn, extra);
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
// Values and callbacks of the shared object and of each thread's own objects.
// ---------------------------------------------------------------------------------------------

constexpr int kSharedKeys = 4;
constexpr int kSharedValuesPerKey = 8;

// Value m of shared key j: a 64-bit word whose halves check each other, so a torn read of two
// different values, or a value of another key, is recognised.
inline std::uint64_t shared_value(int key, int m) {
  const std::uint64_t tag = static_cast<std::uint64_t>(key * kSharedValuesPerKey + m + 1);
  return (tag << 32) | (~tag & 0xFFFFFFFFULL);
}
inline bool shared_value_ok(int key, std::uint64_t v) {
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
inline int shared_delete(Handle, int, void* attribute_val, void* extra_state) {
  auto* c = static_cast<SharedKeyCtx*>(extra_state);
  TCHECK(*c->failures, shared_value_ok(c->key, as_word(attribute_val)),
         "shared delete callback got " << hex(as_word(attribute_val)));
  c->deletes.fetch_add(1);
  return 0;
}

constexpr std::uint64_t kOwnTag = 0x0B;
constexpr std::uint64_t kCopyFlip = 0x04;  // a user copy callback flips this bit of the top byte

inline std::uint64_t own_value(int tid, std::uint64_t serial) {
  return (kOwnTag << 56) | (static_cast<std::uint64_t>(tid) << 40) | (serial & 0xFFFFFFFFFFULL);
}
inline bool own_value_ok(int tid, std::uint64_t v) {
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
inline int own_delete(Handle, int, void* attribute_val, void* extra_state) {
  auto* c = static_cast<OwnCtx*>(extra_state);
  TCHECK(*c->failures, own_value_ok(c->tid, as_word(attribute_val)),
         "thread " << c->tid << " delete callback got " << hex(as_word(attribute_val)));
  c->deletes.fetch_add(1);
  return 0;
}
inline int own_copy(Handle, int, void* extra_state, void* attribute_val_in, void* attribute_val_out,
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

// ---------------------------------------------------------------------------------------------
// Every attribute instance gets exactly one delete callback (engine_threads_keyval_test,
// engine_threads_objects_test): keyvals whose callbacks track instances in an InstanceRegistry.
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

inline int inst_delete(Handle, int keyval, void* attribute_val, void* extra_state) {
  auto* c = static_cast<InstKeyCtx*>(extra_state);
  TCHECK(*c->failures, keyval == c->id, "delete callback keyval " << keyval << " != " << c->id);
  c->registry->on_delete(as_word(attribute_val), "inst_delete");
  c->deletes.fetch_add(1);
  return 0;
}
// Copies an instance as a fresh instance (so every attribute on every object is unique).
inline int inst_copy(Handle, int keyval, void* extra_state, void* attribute_val_in,
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

// Creates one keyval per element of `ctx` with inst_copy / inst_delete (into key[0..N-1]); a
// failure is a gtest failure (the caller returns on HasFatalFailure()).
template <std::size_t N, std::size_t M>
void create_inst_keyvals(Engine& engine, InstanceRegistry* registry, Failures* failures,
                         std::array<InstKeyCtx, N>& ctx, std::array<KeyvalId, M>& key) {
  static_assert(M >= N, "a key for every context");
  for (std::size_t k = 0; k < N; ++k) {
    ctx[k].registry = registry;
    ctx[k].failures = failures;
    ASSERT_EQ(engine
                  .create_keyval(native_spec(ObjectKind::Comm, CopyAction::User, inst_copy, DeleteAction::User,
                                             inst_delete, &ctx[k]),
                                 &key[k])
                  .status,
              Status::Ok);
    ctx[k].id = key[k];
  }
}

// ---------------------------------------------------------------------------------------------
// Callbacks that see the whole call, cause included (engine_threads_callback_test).
// ---------------------------------------------------------------------------------------------

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

inline KeyvalSpec test_spec(ObjectKind kind, CopyAction copy, TestCopyFn copy_fn, DeleteAction del,
                            TestDeleteFn del_fn, const void* extra) {
  return spec_of(kind, copy, copy_fn, del, del_fn, extra);
}

constexpr int kCauses = 6;
constexpr int kCallbackSpin = 150;

}  // namespace engine_threads_fixtures
