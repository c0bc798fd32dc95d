// The engine's building blocks: concurrency primitives (spin lock, sequence counter, per-thread
// callback frames) and storage (keyval slots, Fortran value cells, per-object attribute tables, the
// handle map, value translation). Internal to src/engine/; engine_impl.hpp builds Engine::Impl on them.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "attrcheck/engine.hpp"
#include "attrcheck/spin_lock.hpp"

namespace attrcheck {
namespace engine_detail {

// ---------------------------------------------------------------------------------------------
// 1. Concurrency primitives
// ---------------------------------------------------------------------------------------------

// cpu_relax and SpinLock: attrcheck/spin_lock.hpp (the runtime's keyval locks are SpinLocks too).

using Lock = std::unique_lock<SpinLock>;

#ifdef ATTRCHECK_CHECK_WRITE_SECTIONS
// A checking build of the engine (tests/engine_sections_test.cpp): how many write sections were
// opened inside another one.
inline std::atomic<std::uint64_t> g_nested_write_sections{0};
#endif

// A writer's change to reader-visible state; the lock must be held. A change that can alter
// whether a (kind, handle, keyval) query is valid at all also advances `layout` (after the change,
// so a reader that sees the new layout value also sees the change).
// Sections do not nest: an inner one's end would make the counter even (stable, to a lock-free
// reader) while the outer change is still in progress. A writer that needs two (a record erased,
// then its keyval destroyed by unref_keyval) closes the first before it opens the second
// (drop_attr, free_plain). A checking build counts nested ones (g_nested_write_sections).
class WriteSection {
 public:
  explicit WriteSection(std::atomic<std::uint64_t>& seq, std::atomic<std::uint64_t>* layout = nullptr) noexcept
      : seq_(seq), layout_(layout) {
    open(seq_);
  }
  // A section written out by a path that keeps no object for it (the free's quick step): open
  // returns the counter as it was, close(seq, open's value) ends the section.
  static std::uint64_t open(std::atomic<std::uint64_t>& seq) noexcept {
    const std::uint64_t s = seq.load(std::memory_order_relaxed);
#ifdef ATTRCHECK_CHECK_WRITE_SECTIONS
    if (s & 1) g_nested_write_sections.fetch_add(1, std::memory_order_relaxed);
#endif
    seq.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    return s;
  }
  static void close(std::atomic<std::uint64_t>& seq, std::uint64_t opened_at) noexcept {
    seq.store(opened_at + 2, std::memory_order_release);
  }
  ~WriteSection() {
    seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    // Writers are serialized (the lock, or calls that never overlap), as for seq_: a load and a
    // store, not a locked read-modify-write (~20 cycles; keyval create + free made three).
    if (layout_) layout_->store(layout_->load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  WriteSection(const WriteSection&) = delete;
  WriteSection& operator=(const WriteSection&) = delete;

 private:
  std::atomic<std::uint64_t>& seq_;
  std::atomic<std::uint64_t>* layout_;
};

// The callbacks running on this thread, innermost last: a modification of the object a callback
// runs for, from inside it, is re-entrant.
struct CallbackFrame {
  const void* engine;
  std::uint32_t object_slot;
};
constexpr int kMaxFrames = 64;
inline thread_local CallbackFrame t_frames[kMaxFrames];
inline thread_local int t_depth = 0;

// A token that identifies the calling thread.
inline const void* this_thread_token() noexcept { return &t_depth; }

class FrameGuard {
 public:
  FrameGuard(const void* engine, std::uint32_t slot) noexcept {
    if (t_depth < kMaxFrames) t_frames[t_depth] = CallbackFrame{engine, slot};
    ++t_depth;
  }
  ~FrameGuard() { --t_depth; }
  FrameGuard(const FrameGuard&) = delete;
  FrameGuard& operator=(const FrameGuard&) = delete;
};

inline bool in_callback_for(const void* engine, std::uint32_t slot) noexcept {
  const int n = std::min(t_depth, kMaxFrames);
  for (int i = 0; i < n; ++i)
    if (t_frames[i].engine == engine && t_frames[i].object_slot == slot) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// 2. Storage
// ---------------------------------------------------------------------------------------------

// A fixed directory of lazily allocated chunks: elements never move and are never freed while
// the container lives, so a reader holding an index can always dereference it safely.
template <typename T, std::uint32_t kChunkBits, std::uint32_t kChunks>
class ChunkedArray {
 public:
  static constexpr std::uint32_t kChunk = 1u << kChunkBits;
  static constexpr std::uint32_t kCapacity = kChunk * kChunks;

  ~ChunkedArray() {
    for (auto& c : dir_) delete[] c.load(std::memory_order_relaxed);
  }
  // Reader side: nullptr when `i` is out of range or not allocated yet.
  T* find(std::uint32_t i) const noexcept {
    if (i >= kCapacity) return nullptr;
    T* chunk = dir_[i >> kChunkBits].load(std::memory_order_acquire);
    return chunk ? &chunk[i & (kChunk - 1)] : nullptr;
  }
  // An element known to exist (its chunk allocated, `i` in range): no checks.
  T* at(std::uint32_t i) const noexcept {
    return &dir_[i >> kChunkBits].load(std::memory_order_acquire)[i & (kChunk - 1)];
  }
  // Writer side (lock held): allocates the chunk holding `i` if needed.
  T* get(std::uint32_t i) {
    std::atomic<T*>& slot = dir_[i >> kChunkBits];
    T* chunk = slot.load(std::memory_order_relaxed);
    if (!chunk) {
      chunk = new T[kChunk];
      slot.store(chunk, std::memory_order_release);
    }
    return &chunk[i & (kChunk - 1)];
  }

 private:
  std::atomic<T*> dir_[kChunks] = {};
};

// Keyval ids: (generation << kKeyvalSlotBits) | slot, slot >= 1, generation >= 1 (engine.hpp).
// Generations tell a stale id (an older generation of a slot: it was created, then destroyed) from
// one never created. 2^21 slots: over two million keyvals live at once.
constexpr std::uint32_t kSlotBits = kKeyvalSlotBits;
constexpr std::uint32_t kSlotMask = (1u << kSlotBits) - 1;
constexpr std::uint32_t kMaxGeneration = (1u << (31 - kSlotBits)) - 1;  // ids stay positive 32-bit ints
constexpr std::size_t kReuseAfter = 1024;  // destroyed slots wait this long before reuse

enum KeyvalState : std::uint8_t { kKeyEmpty = 0, kKeyAlive, kKeyFreed, kKeyDestroyed };

struct KeyvalSlot {
  // Read by get_attr:
  std::atomic<KeyvalId> id{0};
  std::atomic<std::uint8_t> state{kKeyEmpty};
  std::atomic<std::uint8_t> kind{0};
  // Lock only:
  std::uint32_t generation = 0;
  std::uint32_t attributes = 0;  // attributes using the key
  std::uint32_t pins = 0;        // operations in flight that still need its callbacks
  bool kept = false;             // freed with keep_slot: not reused until renewed or released
  KeyvalSpec spec;
  Origin created_at = 0;
  Origin freed_at = 0;
};

struct PredefinedKeyval {
  std::atomic<KeyvalId> id{0};
  std::atomic<std::uint8_t> kind{0};
  bool copy_on_dup = true;
  std::string name;
};
constexpr std::uint32_t kMaxPredefined = 64;

// Stable storage for Fortran-set values, so that a C read can return a pointer to the integer.
struct Cell {
  std::atomic<std::int64_t> aint{0};  // what an MPI_Aint* points at
  std::atomic<std::int32_t> low{0};   // what an int* points at (MPI_ATTR_PUT values)
};
static_assert(sizeof(std::atomic<std::int64_t>) == sizeof(std::int64_t), "cell layout");
static_assert(sizeof(std::atomic<std::int32_t>) == sizeof(std::int32_t), "cell layout");

// One attribute in an object's open-addressing table: 24 bytes. `meta` packs the
// representation, the predefined bit and (Fortran values) the index of the value's Cell, so
// get_attr reads everything it needs from three atomics of one record.
constexpr KeyvalId kEmptyKey = INT_MIN;
// A record whose attribute a free in progress has deleted (its delete callback returned, or it
// had none): lookups probe past it as past any other key, so they find the attribute absent and
// the records after it where they were; scans skip it (live_key). It exists only in the table of
// an object that a free holds (marked mutating by it: nothing else changes the table), and the
// free clears every one before it lets go of the table (Engine::Impl::delete_each).
constexpr KeyvalId kDeadKey = INT_MIN + 1;
// Whether a record's key is an attribute's: neither empty nor dead (both lie below every keyval
// id, so the test is one compare, as the test for empty was).
constexpr bool live_key(KeyvalId k) noexcept { return k > kDeadKey; }
constexpr std::uint32_t kMetaReprMask = 3;
constexpr std::uint32_t kMetaPredefined = 4;
constexpr std::uint32_t kMetaCellShift = 3;

struct AttrRec {
  // Read by get_attr:
  std::atomic<KeyvalId> key{kEmptyKey};
  std::atomic<std::uint32_t> meta{0};   // repr | kMetaPredefined | cell << kMetaCellShift
  std::atomic<std::uint64_t> value{0};  // the word as set (normalised)
  // Lock only:
  std::uint32_t order = 0;  // set order within the object
  Origin set_at = 0;

  std::uint32_t cell() const noexcept { return meta.load(std::memory_order_relaxed) >> kMetaCellShift; }
  void copy_from(const AttrRec& o) noexcept {
    key.store(o.key.load(std::memory_order_relaxed), std::memory_order_relaxed);
    meta.store(o.meta.load(std::memory_order_relaxed), std::memory_order_relaxed);
    value.store(o.value.load(std::memory_order_relaxed), std::memory_order_relaxed);
    set_at = o.set_at;
    order = o.order;
  }
  // A dup's copy of a record it copies as it is: the same attribute, set where the dup was made.
  void copy_as_dup(const AttrRec& o, Origin dup_at) noexcept {
    key.store(o.key.load(std::memory_order_relaxed), std::memory_order_relaxed);
    meta.store(o.meta.load(std::memory_order_relaxed), std::memory_order_relaxed);
    value.store(o.value.load(std::memory_order_relaxed), std::memory_order_relaxed);
    set_at = dup_at;
    order = o.order;
  }
  void clear() noexcept { key.store(kEmptyKey, std::memory_order_relaxed); }
};
static_assert(sizeof(AttrRec) == 24, "an attribute record is 24 bytes");

struct AttrTable {
  explicit AttrTable(std::uint32_t log2cap)
      : shift(32 - log2cap), mask((1u << log2cap) - 1), recs(new AttrRec[std::size_t{1} << log2cap]) {}
  std::uint32_t capacity() const noexcept { return mask + 1; }
  std::uint32_t home(KeyvalId key) const noexcept {
    return (static_cast<std::uint32_t>(key) * 0x9E3779B1u) >> shift;
  }
  const std::uint32_t shift;
  const std::uint32_t mask;
  std::uint32_t count = 0;  // lock only: live records
  std::uint32_t dead = 0;   // lock only: kDeadKey records (only while a free holds the table)
  std::unique_ptr<AttrRec[]> recs;
};

// A dup's plan for one attribute it copies, in set order (Engine::Impl::dup_object).
struct CopyStep {
  KeyvalSlot* keyval;  // nullptr: a predefined attribute
  std::uint64_t word;  // the value as set
  KeyvalId key;
  std::uint32_t slot;  // its record's index in the old object's table
  Binding repr;
  bool call;           // its user copy callback decides: the run's next call
};

// A free's plan for one attribute, in set order (Engine::Impl::delete_each): its record, its
// keyval and, for a user delete function, the call (its kind, object and cause are not read:
// CallbackInvoker::del_run takes them from a run's first call, which delete_each makes whole).
struct DeleteStep {
  DeleteCall call;
  KeyvalSlot* keyval;         // nullptr: a predefined attribute
  std::uint32_t slot;         // its record's index in the object's table
  bool user;                  // a user delete function to call
};

// One attribute of an object's flat plan (ObjectSlot::flat_plan): its record's index in the
// object's table, its keyval (nullptr: a predefined attribute) and its key (what a run it stands
// for names: compared without reading the record). (16 bytes, as without the key.)
struct FlatStep {
  KeyvalSlot* keyval;
  std::uint32_t slot;
  KeyvalId key;
};

struct ObjectSlot {
  std::atomic<AttrTable*> table{nullptr};  // read by get_attr
  // Lock only:
  std::uint32_t index = 0;  // its own slot number
  Handle handle = 0;
  ObjectKind kind = ObjectKind::Comm;
  std::uint8_t flags = 0;
  bool live = false;
  const void* mutating = nullptr;  // thread running callbacks for this object, if any
  // `mutating` was set by another thread for that one (Engine::hold_object): its next set or
  // delete of the object takes the mark over as its own and ends it with the change.
  bool held = false;
  Origin created_at = 0;
  std::uint32_t next_order = 1;    // set order of the next attribute
  // The indices into its table of its attributes in set order, oldest first, while set_order_ok:
  // made once for the walks of dups and frees (Engine::Impl::set_order_of) and kept until its
  // records change (store_value and erase_attr drop it; register_object starts without it).
  std::vector<std::uint32_t> set_order;
  bool set_order_ok = false;
  // A dup's plan of it, made from set_order (Engine::Impl::dup_object): what becomes of each
  // attribute, and its copy callbacks' calls, kept with the list while copy_plan_ok (set_order_of
  // drops it whenever it makes the list again, register_object starts without it). Its attributes'
  // keyvals, values and representations are what its records hold, and they do not change while
  // the list stays valid; a keyval's callbacks and extra state do not change while an attribute
  // holds it, nor does whether a predefined keyval's attributes are copied.
  std::vector<CopyStep> copy_steps;
  std::vector<CopyCall> copy_calls;
  bool copy_plan_ok = false;
  bool copy_plan_plain = false;  // every attribute a C value the dup copies (by a C callback if any)
  // Its free's plan, kept with the list while del_plan_ok (dropped as the dup's): made for an
  // object whose dup copies its records as they are, and handed to each such copy with its list.
  std::vector<DeleteStep> del_plan;
  bool del_plan_ok = false;
  // Its flat plan, kept while flat_plan_ok (records_changed drops it): every attribute, in table
  // order, made by a dup that found each a C value it copies as it is (MPI_*_DUP_FN, a predefined
  // attribute the dup carries) and no callback to call (Engine::Impl::dup_plain), and handed to
  // the copy, whose records are the same in the same slots. The next such dup copies the records
  // through it and the free of either drops them through it, neither looking at an empty slot or
  // a keyval's callbacks again (a keyval's callbacks do not change while an attribute holds it).
  // flat_free: no attribute has a user delete function (a free calls nothing).
  // A run plan is a flat plan whose first flat_runs steps are the attributes whose user copy
  // callbacks another cache ran (Engine::dup_object_ran: shadow mode), in the order it ran them,
  // made by a dup that mirrored those runs the plain way (each copied with flag 1); the rest are
  // copied as they are, in table order. A dup with as many runs, each naming its step's key,
  // copies through it; flat_free then says that exactly the first flat_runs steps have a user
  // delete function, and a free whose runs name them in that order or the reverse drops the
  // records through it (objects_ran.cpp).
  std::vector<FlatStep> flat_plan;
  std::uint32_t flat_runs = 0;
  bool flat_plan_ok = false;
  bool flat_free = false;

  // Its records changed (a set, a delete, a move): the plans made from them are dropped.
  void records_changed() noexcept {
    set_order_ok = false;
    flat_plan_ok = false;
  }
};

// Handle -> object slot, open addressing with linear probing and backward-shift deletion.
struct HandleEntry {
  std::atomic<Handle> handle{0};
  std::atomic<std::uint32_t> tag{0};  // 0 = empty; else (slot << 2) | (kind + 1)
};
struct HandleMap {
  explicit HandleMap(std::uint32_t log2cap)
      : shift(64 - log2cap), mask((1u << log2cap) - 1), entries(new HandleEntry[std::size_t{1} << log2cap]) {}
  std::uint32_t home(ObjectKind kind, Handle h) const noexcept {
    const std::uint64_t x = (h ^ (static_cast<std::uint64_t>(kind) << 62)) * 0x9E3779B97F4A7C15ULL;
    return static_cast<std::uint32_t>(x >> shift);
  }
  static std::uint32_t tag_of(ObjectKind kind, std::uint32_t slot) noexcept {
    return (slot << 2) | (static_cast<std::uint32_t>(kind) + 1);
  }
  // Reader and writer: the slot of (kind, h), or UINT32_MAX.
  std::uint32_t find(ObjectKind kind, Handle h, std::uint32_t* pos = nullptr) const noexcept {
    const std::uint32_t want_kind = static_cast<std::uint32_t>(kind) + 1;
    std::uint32_t i = home(kind, h);
    for (std::uint32_t n = 0; n <= mask; ++n, i = (i + 1) & mask) {
      const std::uint32_t tag = entries[i].tag.load(std::memory_order_relaxed);
      if (tag == 0) return UINT32_MAX;
      if ((tag & 3) == want_kind && entries[i].handle.load(std::memory_order_relaxed) == h) {
        if (pos) *pos = i;
        return tag >> 2;
      }
    }
    return UINT32_MAX;
  }
  const std::uint32_t shift;
  const std::uint32_t mask;
  std::uint32_t count = 0;
  std::unique_ptr<HandleEntry[]> entries;
};

// The live records of a table in set order, oldest first: their indices into t->recs go to `out`
// (cleared first). Orders are unique within an object. When they span at most four times as many
// values as there are records (the usual case: attributes set once, copied by a dup, or re-set
// round-robin), each record is placed at its order's offset (one pass for the span, one to place,
// into `out` directly); else the (order, index) pairs are sorted. (dup + free of 64 attributes
// sorted twice with std::sort: ~5,700 instructions of ~96k, Open MPI emulate; the pairs pushed
// and placed: ~47 instructions an attribute, placed directly: ~20, MPICH emulate, callgrind.)
// `scratch` is working space.
inline void records_in_set_order(const AttrTable* t, std::vector<std::uint64_t>* scratch,
                                 std::vector<std::uint32_t>* out) {
  out->clear();
  scratch->clear();
  if (!t || t->count == 0) return;
  std::uint32_t lo = UINT32_MAX, hi = 0, n = 0;
  const AttrRec* recs = t->recs.get();
  for (std::uint32_t i = 0; i <= t->mask; ++i) {
    if (!live_key(recs[i].key.load(std::memory_order_relaxed))) continue;
    lo = std::min(lo, recs[i].order);
    hi = std::max(hi, recs[i].order);
    ++n;
  }
  if (n == 0) return;
  const std::uint64_t span = std::uint64_t{hi} - lo + 1;
  if (span <= 4 * static_cast<std::uint64_t>(n)) {
    out->assign(static_cast<std::size_t>(span), UINT32_MAX);
    std::uint32_t* at = out->data();
    for (std::uint32_t i = 0; i <= t->mask; ++i)
      if (live_key(recs[i].key.load(std::memory_order_relaxed))) at[recs[i].order - lo] = i;
    if (span != n) out->erase(std::remove(out->begin(), out->end(), UINT32_MAX), out->end());
    return;
  }
  for (std::uint32_t i = 0; i <= t->mask; ++i)
    if (live_key(recs[i].key.load(std::memory_order_relaxed)))
      scratch->push_back((static_cast<std::uint64_t>(recs[i].order) << 32) | i);
  std::sort(scratch->begin(), scratch->end());
  out->reserve(n);
  for (const std::uint64_t e : *scratch) out->push_back(static_cast<std::uint32_t>(e));
}

// Vectors kept for reuse by operations that need working space (lock held while taking and
// giving back): a dup or free would otherwise allocate and free its lists on every call.
template <typename T>
class VectorPool {
 public:
  std::vector<T> take() {
    if (free_.empty()) return {};
    std::vector<T> v = std::move(free_.back());
    free_.pop_back();
    v.clear();
    return v;
  }
  // A vector of at least `n` elements, whatever they hold (written before they are read): a
  // vector given back keeps its size, so a dup of an object with as many attributes as the last
  // one's writes nothing before its own writes. (take() then resize(n) value-initialised every
  // element on every dup: ~16 instructions an attribute, MPICH emulate dup [user], callgrind.)
  std::vector<T> take_sized(std::size_t n) {
    std::vector<T> v;
    if (!free_.empty()) {
      v = std::move(free_.back());
      free_.pop_back();
    }
    if (v.size() < n) v.resize(n);
    return v;
  }
  void give(std::vector<T>&& v) {
    if (free_.size() < kKeep) free_.push_back(std::move(v));
  }

 private:
  static constexpr std::size_t kKeep = 8;
  std::vector<std::vector<T>> free_;
};

inline std::uint64_t normalise(Binding from, std::uint64_t value) noexcept {
  if (from == Binding::FortranInt)
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(value)));
  return value;
}

// What a read in binding `as` returns for a value stored as (repr, word, cell): the
// interoperability table of docs/engine.md.
struct Read {
  std::uint64_t word;
  bool truncated;
};
inline Read translate(Binding repr, std::uint64_t word, Cell* cell, Binding as) noexcept {
  switch (as) {
    case Binding::C:
      if (repr == Binding::FortranAint && cell)
        return {reinterpret_cast<std::uintptr_t>(&cell->aint), false};
      if (repr == Binding::FortranInt && cell)
        return {reinterpret_cast<std::uintptr_t>(&cell->low), false};
      return {word, false};
    case Binding::FortranAint:
      return {word, false};
    case Binding::FortranInt: {
      const auto low = static_cast<std::int32_t>(word);
      return {static_cast<std::uint64_t>(static_cast<std::int64_t>(low)),
              static_cast<std::int64_t>(low) != static_cast<std::int64_t>(word)};
    }
  }
  return {word, false};
}

inline void store_out(Binding as, void* out, std::uint64_t word) noexcept {
  switch (as) {
    case Binding::C: {
      void* p = reinterpret_cast<void*>(static_cast<std::uintptr_t>(word));
      std::memcpy(out, &p, sizeof p);
      break;
    }
    case Binding::FortranAint: {
      const auto v = static_cast<std::int64_t>(word);
      std::memcpy(out, &v, sizeof v);
      break;
    }
    case Binding::FortranInt: {
      const auto v = static_cast<std::int32_t>(word);
      std::memcpy(out, &v, sizeof v);
      break;
    }
  }
}

}  // namespace engine_detail
}  // namespace attrcheck
