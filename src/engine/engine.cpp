// The cache engine. docs/engine.md is the contract; this file is organised as:
//   1. concurrency primitives (spin lock, sequence counter, per-thread callback frames)
//   2. storage: keyval slots, Fortran value cells, per-object attribute tables, the handle map
//   3. Engine::Impl: validation, the lock-free read path, and each operation
//
// Concurrency design. All state that get_attr reads lives in memory that is never freed while
// the engine lives (slots and tables are pooled and reused, never returned to the allocator), and
// every field get_attr reads is an atomic. Writers hold `mu_` and bracket each change with the
// sequence counter `seq_` (odd while a change is in progress). get_attr reads optimistically and
// retries if the counter moved, falling back to the lock after a few tries. Nothing is written
// by a reader, so gets from many threads do not contend on a cache line.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "attrcheck/engine.hpp"

namespace attrcheck {
namespace {

// ---------------------------------------------------------------------------------------------
// 1. Concurrency primitives
// ---------------------------------------------------------------------------------------------

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Critical sections never run user code and never block, so a spinning lock (one atomic
// exchange to take, one store to release) is cheaper than a mutex on the hot set/delete path.
// A host whose calls never overlap switches it off (Engine::drop_locking): the exchange is a
// locked instruction that costs as much as a tenth of an MPI library's whole set.
class SpinLock {
 public:
  void lock() noexcept {
    if (!enabled_.load(std::memory_order_relaxed)) return;
    for (unsigned spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 128) {
          cpu_relax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() noexcept {
    if (enabled_.load(std::memory_order_relaxed)) locked_.store(false, std::memory_order_release);
  }
  void disable() noexcept { enabled_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> locked_{false};
  std::atomic<bool> enabled_{true};
};

using Lock = std::unique_lock<SpinLock>;

// A writer's change to reader-visible state; the lock must be held. A change that can alter
// whether a (kind, handle, keyval) query is valid at all also advances `layout` (after the change,
// so a reader that sees the new layout value also sees the change).
class WriteSection {
 public:
  explicit WriteSection(std::atomic<std::uint64_t>& seq, std::atomic<std::uint64_t>* layout = nullptr) noexcept
      : seq_(seq), layout_(layout) {
    const std::uint64_t s = seq_.load(std::memory_order_relaxed);
    seq_.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  ~WriteSection() {
    seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    if (layout_) layout_->fetch_add(1, std::memory_order_release);
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
thread_local CallbackFrame t_frames[kMaxFrames];
thread_local int t_depth = 0;

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

bool in_callback_for(const void* engine, std::uint32_t slot) noexcept {
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
  std::uint32_t count = 0;  // lock only
  std::unique_ptr<AttrRec[]> recs;
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
  Origin created_at = 0;
  std::uint32_t next_order = 1;    // set order of the next attribute
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// NativeInvoker
// ---------------------------------------------------------------------------------------------

int NativeInvoker::copy(const CopyCall& call, std::uint64_t* value_out, int* flag) {
  auto fn = reinterpret_cast<NativeCopyFn>(call.fn);
  return fn(call.old_object, call.keyval, reinterpret_cast<void*>(call.extra_state),
            reinterpret_cast<void*>(static_cast<std::uintptr_t>(call.value_in)), value_out, flag);
}

int NativeInvoker::del(const DeleteCall& call) {
  auto fn = reinterpret_cast<NativeDeleteFn>(call.fn);
  return fn(call.object, call.keyval, reinterpret_cast<void*>(static_cast<std::uintptr_t>(call.value)),
            reinterpret_cast<void*>(call.extra_state));
}

// ---------------------------------------------------------------------------------------------
// 3. The engine
// ---------------------------------------------------------------------------------------------

struct Engine::Impl {
  explicit Impl(const EngineConfig& c) : config(c) {
    if (!config.invoker) {
      owned_invoker = std::make_unique<NativeInvoker>();
      config.invoker = owned_invoker.get();
    }
    Lock lk(mu_);
    WriteSection ws(seq_);
    map_.store(new_map(4), std::memory_order_release);
  }

  ~Impl() { delete map_.load(); }  // tables live in all_tables_, retired maps in retired_maps_

  EngineConfig config;
  std::unique_ptr<NativeInvoker> owned_invoker;

  mutable SpinLock mu_;
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<std::uint64_t> layout_{1};  // see Engine::layout_version()
  std::atomic<bool> finalized_{false};

  // Keyvals.
  ChunkedArray<KeyvalSlot, 10, (1u << kSlotBits) / 1024> keyvals_;  // index = slot number (0 unused)
  std::uint32_t keyval_slots_used_ = 1;
  std::deque<std::uint32_t> destroyed_slots_;
  PredefinedKeyval predefined_[kMaxPredefined];
  std::atomic<std::uint32_t> predefined_count_{0};

  // Objects.
  ChunkedArray<ObjectSlot, 10, 4096> objects_;
  std::uint32_t object_count_ = 0;
  std::vector<std::uint32_t> free_object_slots_;
  std::atomic<HandleMap*> map_{nullptr};
  std::vector<std::unique_ptr<HandleMap>> retired_maps_;  // may still be read by a stale reader

  // Attribute tables, pooled by log2(capacity): a table is never freed while the engine lives.
  std::vector<AttrTable*> table_pool_[32];
  std::vector<std::unique_ptr<AttrTable>> all_tables_;

  // Fortran value cells.
  ChunkedArray<Cell, 10, 4096> cells_;
  std::uint32_t cell_count_ = 1;  // index 0 = none
  std::vector<std::uint32_t> free_cells_;
  std::size_t cells_in_use_ = 0;


  // ---- helpers: keyvals -------------------------------------------------------------------

  const PredefinedKeyval* find_predefined(KeyvalId id) const noexcept {
    const std::uint32_t n = predefined_count_.load(std::memory_order_acquire);
    for (std::uint32_t i = 0; i < n; ++i)
      if (predefined_[i].id.load(std::memory_order_relaxed) == id) return &predefined_[i];
    return nullptr;
  }

  // The slot a user keyval id lives in, whatever its state (nullptr if never allocated).
  KeyvalSlot* slot_of(KeyvalId id) const noexcept {
    if (id <= 0) return nullptr;
    const std::uint32_t slot = static_cast<std::uint32_t>(id) & kSlotMask;
    if (slot == 0) return nullptr;
    return keyvals_.find(slot);
  }

  // Classifies a user keyval id (lock held). Ok: alive and not freed by the user.
  Status classify_keyval(KeyvalId id, KeyvalSlot** out) const noexcept {
    KeyvalSlot* k = slot_of(id);
    if (!k) return Status::KeyvalUnknown;
    const std::uint32_t gen = static_cast<std::uint32_t>(id) >> kSlotBits;
    if (k->id.load(std::memory_order_relaxed) == id && k->state.load(std::memory_order_relaxed) != kKeyEmpty) {
      *out = k;
      return k->state.load(std::memory_order_relaxed) == kKeyAlive ? Status::Ok : Status::KeyvalFreed;
    }
    if (gen >= 1 && gen < k->generation) return Status::KeyvalFreed;
    return Status::KeyvalUnknown;
  }

  // How an attribute call uses its keyval: set and delete refuse predefined keyvals; delete also
  // accepts a keyval the user freed while attributes still use it (MPI_COMM_FREE_KEYVAL: "the
  // remaining references need to be explicitly freed ... via calls to MPI_COMM_DELETE_ATTR").
  enum class KeyUse : std::uint8_t { Get, Set, Delete };

  // Keyval validation for attribute calls (lock held).
  Status check_keyval(ObjectKind kind, KeyvalId id, KeyUse use, KeyvalSlot** user,
                      const PredefinedKeyval** pre) const noexcept {
    *user = nullptr;
    *pre = nullptr;
    const bool modify = use != KeyUse::Get;
    if (id == config.keyval_invalid) return Status::KeyvalInvalid;
    KeyvalSlot* k = nullptr;
    Status s = classify_keyval(id, &k);
    if (s == Status::KeyvalFreed && use == KeyUse::Delete && k &&
        k->state.load(std::memory_order_relaxed) == kKeyFreed)
      s = Status::Ok;  // freed by the user, still alive through its attributes
    if (s != Status::Ok) {
      // Predefined ids are never engine ids (create_keyval skips them): only now look them up.
      if (const PredefinedKeyval* p = find_predefined(id)) {
        if (p->kind.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(kind))
          return Status::KeyvalKindMismatch;
        if (modify) return Status::KeyvalPredefined;
        *pre = p;
        return Status::Ok;
      }
      return s;
    }
    if (k->spec.kind != kind) return Status::KeyvalKindMismatch;
    *user = k;
    return Status::Ok;
  }

  void unref_keyval(KeyvalSlot* k) {
    if (k->state.load(std::memory_order_relaxed) == kKeyFreed && k->attributes == 0 && k->pins == 0) {
      WriteSection ws(seq_, &layout_);
      k->state.store(kKeyDestroyed, std::memory_order_relaxed);
      destroyed_slots_.push_back(static_cast<std::uint32_t>(k->id.load(std::memory_order_relaxed)) & kSlotMask);
    }
  }

  // ---- helpers: objects -------------------------------------------------------------------

  static HandleMap* new_map(std::uint32_t log2cap) { return new HandleMap(log2cap); }

  // Lock held. Ok with *slot set, or ObjectNull / ObjectUnknown.
  Status find_object(ObjectKind kind, Handle h, std::uint32_t* slot) const noexcept {
    if (h == config.null_handle[static_cast<int>(kind)]) return Status::ObjectNull;
    const std::uint32_t s = map_.load(std::memory_order_relaxed)->find(kind, h);
    if (s == UINT32_MAX) return Status::ObjectUnknown;
    *slot = s;
    return Status::Ok;
  }

  ObjectSlot* object(std::uint32_t slot) noexcept { return objects_.get(slot); }

  std::uint32_t register_object(ObjectKind kind, Handle h, std::uint8_t flags, Origin origin) {
    std::uint32_t slot;
    if (config.max_objects && object_count_ - free_object_slots_.size() >= config.max_objects) return UINT32_MAX;
    if (!free_object_slots_.empty()) {
      slot = free_object_slots_.back();
      free_object_slots_.pop_back();
    } else {
      if (object_count_ >= decltype(objects_)::kCapacity) return UINT32_MAX;
      slot = object_count_++;
    }
    ObjectSlot* o = objects_.get(slot);
    o->index = slot;
    o->handle = h;
    o->kind = kind;
    o->flags = flags;
    o->live = true;
    o->mutating = nullptr;
    o->created_at = origin;
    o->next_order = 1;

    HandleMap* m = map_.load(std::memory_order_relaxed);
    WriteSection ws(seq_, &layout_);
    if ((m->count + 1) * 2 > m->mask + 1) {
      HandleMap* bigger = new_map(64 - m->shift + 1);
      for (std::uint32_t i = 0; i <= m->mask; ++i) {
        const std::uint32_t tag = m->entries[i].tag.load(std::memory_order_relaxed);
        if (tag) map_insert(bigger, m->entries[i].handle.load(std::memory_order_relaxed), tag);
      }
      map_.store(bigger, std::memory_order_release);
      retired_maps_.emplace_back(m);
      m = bigger;
    }
    map_insert(m, h, HandleMap::tag_of(kind, slot));
    return slot;
  }

  static void map_insert(HandleMap* m, Handle h, std::uint32_t tag) noexcept {
    const auto kind = static_cast<ObjectKind>((tag & 3) - 1);
    std::uint32_t i = m->home(kind, h);
    while (m->entries[i].tag.load(std::memory_order_relaxed) != 0) i = (i + 1) & m->mask;
    m->entries[i].handle.store(h, std::memory_order_relaxed);
    m->entries[i].tag.store(tag, std::memory_order_relaxed);
    ++m->count;
  }

  // Removes the object from the handle map and returns its storage to the pools (lock held).
  void unregister_object(std::uint32_t slot) {
    ObjectSlot* o = objects_.get(slot);
    HandleMap* m = map_.load(std::memory_order_relaxed);
    WriteSection ws(seq_, &layout_);
    std::uint32_t hole = 0;
    if (m->find(o->kind, o->handle, &hole) != UINT32_MAX) {
      // Backward-shift deletion keeps every probe sequence unbroken.
      std::uint32_t j = hole;
      for (;;) {
        j = (j + 1) & m->mask;
        const std::uint32_t tag = m->entries[j].tag.load(std::memory_order_relaxed);
        if (tag == 0) break;
        const Handle hj = m->entries[j].handle.load(std::memory_order_relaxed);
        const std::uint32_t k = m->home(static_cast<ObjectKind>((tag & 3) - 1), hj);
        const bool stays = (hole <= j) ? (hole < k && k <= j) : (hole < k || k <= j);
        if (stays) continue;
        m->entries[hole].handle.store(hj, std::memory_order_relaxed);
        m->entries[hole].tag.store(tag, std::memory_order_relaxed);
        hole = j;
      }
      m->entries[hole].tag.store(0, std::memory_order_relaxed);
      --m->count;
    }
    if (AttrTable* t = o->table.load(std::memory_order_relaxed)) {
      for (std::uint32_t i = 0; i <= t->mask; ++i) {
        if (t->recs[i].key.load(std::memory_order_relaxed) != kEmptyKey) release_cell(t->recs[i]);
        t->recs[i].clear();
      }
      t->count = 0;
      o->table.store(nullptr, std::memory_order_relaxed);
      table_pool_[32 - t->shift].push_back(t);
    }
    o->live = false;
    free_object_slots_.push_back(slot);
  }

  // ---- helpers: attribute tables -----------------------------------------------------------

  AttrTable* take_table(std::uint32_t log2cap) {
    auto& pool = table_pool_[log2cap];
    if (!pool.empty()) {
      AttrTable* t = pool.back();
      pool.pop_back();
      return t;
    }
    all_tables_.push_back(std::make_unique<AttrTable>(log2cap));
    return all_tables_.back().get();
  }

  static AttrRec* find_attr(AttrTable* t, KeyvalId key) noexcept {
    if (!t) return nullptr;
    std::uint32_t i = t->home(key);
    for (std::uint32_t n = 0; n <= t->mask; ++n, i = (i + 1) & t->mask) {
      const KeyvalId k = t->recs[i].key.load(std::memory_order_relaxed);
      if (k == key) return &t->recs[i];
      if (k == kEmptyKey) return nullptr;
    }
    return nullptr;
  }

  // A free record for `key` in the object's table, growing it if needed (inside a WriteSection).
  AttrRec* insert_slot(ObjectSlot* o, KeyvalId key) {
    AttrTable* t = o->table.load(std::memory_order_relaxed);
    if (!t || (t->count + 1) * 4 > t->capacity() * 3) {
      const std::uint32_t log2cap = t ? 32 - t->shift + 1 : 2;
      AttrTable* bigger = take_table(log2cap);
      if (t) {
        for (std::uint32_t i = 0; i <= t->mask; ++i) {
          if (t->recs[i].key.load(std::memory_order_relaxed) == kEmptyKey) continue;
          AttrRec* dst = probe_empty(bigger, t->recs[i].key.load(std::memory_order_relaxed));
          dst->copy_from(t->recs[i]);
          t->recs[i].clear();
        }
        bigger->count = t->count;
        t->count = 0;
        table_pool_[32 - t->shift].push_back(t);
      }
      o->table.store(bigger, std::memory_order_release);
      t = bigger;
    }
    ++t->count;
    return probe_empty(t, key);
  }

  // Gives an empty object a table that holds `n` attributes without growing.
  void reserve(ObjectSlot* o, std::uint32_t n) {
    if (n == 0 || o->table.load(std::memory_order_relaxed)) return;
    std::uint32_t log2cap = 2;
    while ((n + 1) * 4 > (1u << log2cap) * 3) ++log2cap;
    WriteSection ws(seq_);
    o->table.store(take_table(log2cap), std::memory_order_release);
  }

  static AttrRec* probe_empty(AttrTable* t, KeyvalId key) noexcept {
    std::uint32_t i = t->home(key);
    while (t->recs[i].key.load(std::memory_order_relaxed) != kEmptyKey) i = (i + 1) & t->mask;
    return &t->recs[i];
  }

  // Removes a record (inside a WriteSection), with backward-shift deletion.
  void erase_attr(ObjectSlot* o, AttrRec* rec) {
    AttrTable* t = o->table.load(std::memory_order_relaxed);
    release_cell(*rec);
    std::uint32_t hole = static_cast<std::uint32_t>(rec - t->recs.get());
    std::uint32_t j = hole;
    for (;;) {
      j = (j + 1) & t->mask;
      const KeyvalId kj = t->recs[j].key.load(std::memory_order_relaxed);
      if (kj == kEmptyKey) break;
      const std::uint32_t k = t->home(kj);
      const bool stays = (hole <= j) ? (hole < k && k <= j) : (hole < k || k <= j);
      if (stays) continue;
      t->recs[hole].copy_from(t->recs[j]);
      hole = j;
    }
    t->recs[hole].clear();
    --t->count;
  }

  Cell* cell_at(std::uint32_t index) const noexcept { return index ? cells_.find(index) : nullptr; }

  // Stores value/repr into a record (inside a WriteSection), allocating a cell for Fortran reprs.
  // The record becomes the object's newest.
  bool fill(ObjectSlot* o, AttrRec* rec, KeyvalId key, Binding repr, std::uint64_t word, bool predefined,
            Origin origin) {
    std::uint32_t cell = 0;
    if (repr != Binding::C) {
      if (!free_cells_.empty()) {
        cell = free_cells_.back();
        free_cells_.pop_back();
      } else {
        if (cell_count_ >= decltype(cells_)::kCapacity) return false;
        cell = cell_count_++;
      }
      Cell* c = cells_.get(cell);
      c->aint.store(static_cast<std::int64_t>(word), std::memory_order_relaxed);
      c->low.store(static_cast<std::int32_t>(word), std::memory_order_relaxed);
      ++cells_in_use_;
    }
    rec->key.store(key, std::memory_order_relaxed);
    store_value(o, rec, static_cast<std::uint32_t>(repr) | (predefined ? kMetaPredefined : 0u) | (cell << kMetaCellShift),
                word, origin);
    return true;
  }

  // The part of fill() after the cell (inside a WriteSection).
  static void store_value(ObjectSlot* o, AttrRec* rec, std::uint32_t meta, std::uint64_t word, Origin origin) {
    rec->meta.store(meta, std::memory_order_relaxed);
    rec->value.store(word, std::memory_order_relaxed);
    rec->set_at = origin;
    if (__builtin_expect(o->next_order == UINT32_MAX, 0)) renumber(o);
    rec->order = o->next_order++;
  }

  // After 2^32 sets on one object: renumber its attributes 1..n, keeping their order.
  static void renumber(ObjectSlot* o) {
    AttrTable* t = o->table.load(std::memory_order_relaxed);
    std::vector<AttrRec*> recs;
    for (std::uint32_t i = 0; i <= t->mask; ++i)
      if (t->recs[i].key.load(std::memory_order_relaxed) != kEmptyKey) recs.push_back(&t->recs[i]);
    std::sort(recs.begin(), recs.end(), [](const AttrRec* a, const AttrRec* b) { return a->order < b->order; });
    o->next_order = 1;
    for (AttrRec* r : recs) r->order = o->next_order++;
  }

  void release_cell(AttrRec& rec) {
    const std::uint32_t cell = rec.cell();
    if (!cell) return;
    free_cells_.push_back(cell);
    --cells_in_use_;
    rec.meta.store(rec.meta.load(std::memory_order_relaxed) & ((1u << kMetaCellShift) - 1),
                   std::memory_order_relaxed);
  }

  static Binding repr_of(const AttrRec& rec) noexcept {
    return static_cast<Binding>(rec.meta.load(std::memory_order_relaxed) & kMetaReprMask);
  }
  static bool predefined_rec(const AttrRec& rec) noexcept {
    return rec.meta.load(std::memory_order_relaxed) & kMetaPredefined;
  }

  // Sets (inserting or overwriting) an attribute record without callbacks (lock held).
  Status put(ObjectSlot* o, KeyvalId key, Binding repr, std::uint64_t word, bool predefined, Origin origin) {
    return put_at(o, find_attr(o->table.load(std::memory_order_relaxed), key), key, repr, word, predefined, origin);
  }
  // put() where the record for `key` is known: `rec`, or nullptr if there is none.
  Status put_at(ObjectSlot* o, AttrRec* rec, KeyvalId key, Binding repr, std::uint64_t word, bool predefined,
                Origin origin) {
    WriteSection ws(seq_);
    if (rec) {
      release_cell(*rec);
    } else {
      rec = insert_slot(o, key);
    }
    if (!fill(o, rec, key, repr, word, predefined, origin)) {
      erase_attr(o, rec);
      return Status::CapacityExhausted;
    }
    return Status::Ok;
  }

  // ---- waiting and callbacks ---------------------------------------------------------------

  // Another thread is running callbacks for an object this call wants: let it finish.
  static void wait_turn(Lock& lk) {
    lk.unlock();
    std::this_thread::yield();
    lk.lock();
  }

  void notify(const CallbackEvent& e) {
    if (!config.observer) return;
    try {
      config.observer->on_callback(e);
    } catch (...) {
      // An observer must not be able to break the engine.
    }
  }

  // A snapshot of what a delete callback needs, taken under the lock.
  struct DeleteJob {
    KeyvalId key;
    KeyvalSlot* keyval;  // pinned; nullptr for predefined attributes
    DeleteCall call;
    bool user;           // a User delete action: call it
  };

  DeleteJob make_delete_job(ObjectSlot* o, AttrRec* rec, CallbackCause cause) {
    DeleteJob job{};
    job.key = rec->key.load(std::memory_order_relaxed);
    if (!predefined_rec(*rec)) {
      KeyvalSlot* k = nullptr;
      // Attributes hold their keyval alive, so the id always resolves to its slot.
      KeyvalSlot* ks = slot_of(job.key);
      if (ks && ks->id.load(std::memory_order_relaxed) == job.key) k = ks;
      job.keyval = k;
      if (k) {
        ++k->pins;
        job.user = k->spec.del.action == DeleteAction::User;
        const Read r = translate(repr_of(*rec), rec->value.load(std::memory_order_relaxed),
                                 cell_at(rec->cell()), k->spec.lang);
        job.call = DeleteCall{o->kind, o->handle, job.key, k->spec.lang, k->spec.del.fn,
                              k->spec.extra_state, r.word, cause, repr_of(*rec)};
      }
    }
    return job;
  }

  // Runs a delete callback with the lock released. Returns Ok, CallbackFailed or CallbackThrew.
  Result run_delete(Lock& lk, std::uint32_t slot, const DeleteJob& job) {
    if (!job.user) return {};
    lk.unlock();
    Result result;
    bool threw = false;
    int rc = 0;
    {
      FrameGuard frame(this, slot);
      try {
        rc = config.invoker->del(job.call);
      } catch (...) {
        threw = true;
      }
    }
    notify(CallbackEvent{CallbackEvent::Which::Delete, job.call.cause, job.call.kind, job.call.object,
                         job.key, rc, 0, threw});
    if (threw) {
      result = {Status::CallbackThrew, 0};
    } else if (rc != 0) {
      result = {Status::CallbackFailed, rc};
    }
    lk.lock();
    return result;
  }

  void unpin(KeyvalSlot* k) {
    if (!k) return;
    --k->pins;
    unref_keyval(k);
  }

  // Deletes attribute `key` of an object that this thread is marked as mutating (lock held):
  // runs the callback, then removes the record if it succeeded.
  Result delete_one(Lock& lk, std::uint32_t slot, ObjectSlot* o, KeyvalId key, CallbackCause cause) {
    AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), key);
    if (!rec) return {};
    DeleteJob job = make_delete_job(o, rec, cause);
    const Result r = run_delete(lk, slot, job);
    if (r.ok()) {
      rec = find_attr(o->table.load(std::memory_order_relaxed), key);
      if (rec) {
        WriteSection ws(seq_);
        erase_attr(o, rec);
        if (job.keyval) --job.keyval->attributes;
      }
    }
    unpin(job.keyval);
    return r;
  }

  // The object's attribute keys, newest first (lock held).
  static std::vector<std::pair<std::uint32_t, KeyvalId>> keys_newest_first(const ObjectSlot* o) {
    std::vector<std::pair<std::uint32_t, KeyvalId>> keys;
    const AttrTable* t = o->table.load(std::memory_order_relaxed);
    if (!t) return keys;
    keys.reserve(t->count);
    for (std::uint32_t i = 0; i <= t->mask; ++i) {
      const KeyvalId k = t->recs[i].key.load(std::memory_order_relaxed);
      if (k != kEmptyKey) keys.emplace_back(t->recs[i].order, k);
    }
    std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    return keys;
  }

  // Deletes all attributes, newest first. Stops at the first failure when `stop`, else records
  // failures in `failures` and goes on. Lock held, object marked mutating by this thread.
  Result delete_all(Lock& lk, std::uint32_t slot, CallbackCause cause, bool stop,
                    std::vector<FinalizeReport::Failure>* failures) {
    ObjectSlot* o = objects_.get(slot);
    Result first;
    for (const auto& entry : keys_newest_first(o)) {
      const Result r = delete_one(lk, slot, o, entry.second, cause);
      if (r.ok()) continue;
      if (first.ok()) first = r;
      if (failures) failures->push_back({o->kind, o->handle, entry.second, r});
      if (stop) return r;
    }
    return first;
  }

  // ---- operations ----------------------------------------------------------------------------

  Result create_keyval(const KeyvalSpec& spec, KeyvalId* out, Origin origin) {
    Lock lk(mu_);
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    if (!out || (spec.copy.action == CopyAction::User && !spec.copy.fn) ||
        (spec.del.action == DeleteAction::User && !spec.del.fn))
      return {Status::NullArgument, 0};
    const std::uint32_t last_slot =
        config.max_keyvals && config.max_keyvals < kSlotMask ? config.max_keyvals : kSlotMask;
    for (;;) {
      std::uint32_t slot;
      if (destroyed_slots_.size() > kReuseAfter ||
          (keyval_slots_used_ > last_slot && !destroyed_slots_.empty())) {
        slot = destroyed_slots_.front();
        destroyed_slots_.pop_front();
      } else if (keyval_slots_used_ <= last_slot) {
        slot = keyval_slots_used_++;
      } else {
        return {Status::CapacityExhausted, 0};
      }
      KeyvalSlot* k = keyvals_.get(slot);
      if (k->generation >= kMaxGeneration) continue;  // retired for good
      const std::uint32_t gen = ++k->generation;
      const auto id = static_cast<KeyvalId>((gen << kSlotBits) | slot);
      if (id == config.keyval_invalid || find_predefined(id)) {
        // Never hand out a reserved id: skip this generation (the slot keeps its previous id and
        // state) and put the slot back for later.
        destroyed_slots_.push_back(slot);
        continue;
      }
      {
        WriteSection ws(seq_, &layout_);
        k->kind.store(static_cast<std::uint8_t>(spec.kind), std::memory_order_relaxed);
        k->state.store(kKeyAlive, std::memory_order_relaxed);
        k->id.store(id, std::memory_order_relaxed);
      }
      k->attributes = 0;
      k->pins = 0;
      k->spec = spec;
      k->created_at = origin;
      k->freed_at = 0;
      *out = id;
      return {};
    }
  }

  Result free_keyval(ObjectKind kind, KeyvalId* keyval, Origin origin) {
    Lock lk(mu_);
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    if (!keyval) return {Status::NullArgument, 0};
    const KeyvalId id = *keyval;
    if (id == config.keyval_invalid) return {Status::KeyvalInvalid, 0};
    if (find_predefined(id)) return {Status::KeyvalPredefined, 0};
    KeyvalSlot* k = nullptr;
    const Status s = classify_keyval(id, &k);
    if (s == Status::KeyvalUnknown) return {s, 0};
    if (s == Status::KeyvalFreed) return {Status::KeyvalDoubleFree, 0};
    if (k->spec.kind != kind) return {Status::KeyvalKindMismatch, 0};
    {
      WriteSection ws(seq_, &layout_);
      k->state.store(kKeyFreed, std::memory_order_relaxed);
    }
    k->freed_at = origin;
    unref_keyval(k);
    *keyval = config.keyval_invalid;
    return {};
  }

  Result register_predefined(ObjectKind kind, KeyvalId id, const char* name, bool copy_on_dup) {
    Lock lk(mu_);
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    if (id == config.keyval_invalid) return {Status::KeyvalInvalid, 0};
    KeyvalSlot* k = nullptr;
    if (find_predefined(id) || classify_keyval(id, &k) != Status::KeyvalUnknown)
      return {Status::KeyvalPredefined, 0};
    const std::uint32_t n = predefined_count_.load(std::memory_order_relaxed);
    if (n >= kMaxPredefined) return {Status::CapacityExhausted, 0};
    WriteSection ws(seq_, &layout_);
    PredefinedKeyval& p = predefined_[n];
    p.id.store(id, std::memory_order_relaxed);
    p.kind.store(static_cast<std::uint8_t>(kind), std::memory_order_relaxed);
    p.copy_on_dup = copy_on_dup;
    p.name = name ? name : "";
    predefined_count_.store(n + 1, std::memory_order_release);
    return {};
  }

  Result create_object(ObjectKind kind, Handle h, std::uint8_t flags, Origin origin) {
    Lock lk(mu_);
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    std::uint32_t slot;
    const Status s = find_object(kind, h, &slot);
    if (s == Status::ObjectNull) return {s, 0};
    if (s == Status::Ok) return {Status::ObjectExists, 0};
    if (register_object(kind, h, flags, origin) == UINT32_MAX) return {Status::CapacityExhausted, 0};
    return {};
  }

  // Validates the object of a modifying call and waits while another thread runs callbacks for
  // it (lock held; loops until it can proceed).
  Status acquire_object(Lock& lk, ObjectKind kind, Handle h, KeyvalId key, bool with_key,
                        std::uint32_t* slot, KeyvalSlot** k, const PredefinedKeyval** pre,
                        KeyUse use = KeyUse::Set) {
    for (;;) {
      if (finalized_.load(std::memory_order_relaxed)) return Status::Finalized;
      Status s = find_object(kind, h, slot);
      if (s != Status::Ok) return s;
      if (with_key) {
        s = check_keyval(kind, key, use, k, pre);
        if (s != Status::Ok) return s;
      }
      if (in_callback_for(this, *slot)) return Status::Reentrant;
      ObjectSlot* o = objects_.get(*slot);
      if (o->mutating && o->mutating != this_thread_token()) {
        wait_turn(lk);
        continue;
      }
      if (o->mutating) return Status::Reentrant;  // this thread, further out: still re-entrant
      return Status::Ok;
    }
  }

  Result set_attr(ObjectKind kind, Handle h, KeyvalId key, Binding from, std::uint64_t value, Origin origin) {
    value = normalise(from, value);
    Lock lk(mu_);
    std::uint32_t slot;
    KeyvalSlot* k;
    const PredefinedKeyval* pre;
    const Status s = acquire_object(lk, kind, h, key, true, &slot, &k, &pre);
    if (s != Status::Ok) return {s, 0};
    ObjectSlot* o = objects_.get(slot);
    AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), key);
    if (rec && k->spec.del.action == DeleteAction::User) {
      // Replace: the old value's delete callback runs first, and may veto the set.
      o->mutating = this_thread_token();
      DeleteJob job = make_delete_job(o, rec, CallbackCause::Set);
      const Result r = run_delete(lk, slot, job);
      o->mutating = nullptr;
      unpin(job.keyval);
      if (!r.ok()) return r;
    }
    // Only this thread could change the object meanwhile, and re-entrant changes were refused, so
    // the attribute is still there, where it was unless the callback's other changes moved it.
    return store_set(o, k, find_attr(o->table.load(std::memory_order_relaxed), key), key, from, value, origin);
  }

  // The end of a set, after the old value's delete callback (if any) succeeded (lock held):
  // stores the value in `rec` (the attribute's record; nullptr: a new one), the object's newest.
  Result store_set(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec, KeyvalId key, Binding from, std::uint64_t value,
                   Origin origin) {
    const bool existed = rec != nullptr;
    const Status ps = put_at(o, rec, key, from, value, false, origin);
    if (ps != Status::Ok) {  // out of cells: put() removed the record
      if (existed) {
        --k->attributes;
        unref_keyval(k);
      }
      return {ps, 0};
    }
    if (!existed) ++k->attributes;
    return {};
  }

  // Engine::find_set_cursor: set_attr's checks, remembered.
  bool find_set_cursor(ObjectKind kind, Handle h, KeyvalId key, std::uint64_t layout, SetCursor* out,
                       bool* user_delete) const {
    Lock lk(mu_);
    if (finalized_.load(std::memory_order_relaxed)) return false;
    std::uint32_t slot;
    if (find_object(kind, h, &slot) != Status::Ok) return false;
    KeyvalSlot* k;
    const PredefinedKeyval* pre;
    if (check_keyval(kind, key, KeyUse::Set, &k, &pre) != Status::Ok || !k) return false;
    *out = SetCursor{layout, objects_.find(slot), k};
    if (user_delete) *user_delete = k->spec.del.action == DeleteAction::User;
    return true;
  }

  // Engine::set_attr_ran: set_attr for a set whose delete callback already ran elsewhere. The
  // cursor stands for set_attr's object and keyval checks while the layout reads the same; the
  // rest are made here. Nothing waits and nothing is called: anything other than the plain case
  // (no callbacks running for the object, exactly the delete callback the standard requires here
  // and it succeeded) answers false and changes nothing.
  bool set_attr_ran(const SetCursor& c, Binding from, std::uint64_t value, Origin origin, const RanDelete* ran,
                    std::uint64_t* version) {
    value = normalise(from, value);
    std::lock_guard<SpinLock> lk(mu_);
    if (!c.object || layout_.load(std::memory_order_relaxed) != c.layout) return false;
    auto* o = static_cast<ObjectSlot*>(const_cast<void*>(c.object));
    auto* k = static_cast<KeyvalSlot*>(const_cast<void*>(c.keyval));
    if (o->mutating || (t_depth > 0 && in_callback_for(this, o->index))) return false;
    const KeyvalId key = k->id.load(std::memory_order_relaxed);
    AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), key);
    const bool needs_delete = rec && k->spec.del.action == DeleteAction::User;
    if (needs_delete != (ran != nullptr)) return false;
    if (from != Binding::C && free_cells_.empty() && cell_count_ >= decltype(cells_)::kCapacity)
      return false;  // set_attr would fail after the callback: let it
    if (ran) {
      // The value the callback must have been passed; a Fortran-set value reaches a C callback as
      // the address of wherever its holder stores it, which only the holder knows.
      if (ran->rc != 0 || ran->object != o->handle || ran->keyval != key) return false;
      const Binding repr = repr_of(*rec);
      if (repr != Binding::C && k->spec.lang == Binding::C) return false;
      if (ran->value != translate(repr, rec->value.load(std::memory_order_relaxed), nullptr, k->spec.lang).word)
        return false;
    }
    // Replacing a C value with a C value needs no cell and changes no count: done here, it saves
    // the store_set / put_at call chain (~45 instructions of a mirrored set, callgrind).
    if (rec && from == Binding::C && repr_of(*rec) == Binding::C) {
      WriteSection ws(seq_);
      store_value(o, rec, static_cast<std::uint32_t>(Binding::C), value, origin);
    } else if (!store_set(o, k, rec, key, from, value, origin).ok()) {
      return false;
    }
    if (version) *version = seq_.load(std::memory_order_relaxed);
    return true;
  }

  // The checks of a call that reads (get) or may delete an attribute (lock held): Ok with the
  // attribute's record (nullptr if not set), or why the call is refused.
  Status locate_attr(ObjectKind kind, Handle h, KeyvalId key, KeyUse use, const AttrRec** rec) const {
    if (finalized_.load(std::memory_order_relaxed)) return Status::Finalized;
    std::uint32_t slot;
    Status s = find_object(kind, h, &slot);
    if (s != Status::Ok) return s;
    KeyvalSlot* k;
    const PredefinedKeyval* pre;
    s = check_keyval(kind, key, use, &k, &pre);
    if (s != Status::Ok) return s;
    *rec = find_attr(objects_.find(slot)->table.load(std::memory_order_relaxed), key);
    return Status::Ok;
  }

  Result get_attr_locked(ObjectKind kind, Handle h, KeyvalId key, Binding as, void* out, int* flag,
                         bool* truncated) const {
    Lock lk(mu_);
    const AttrRec* rec = nullptr;
    const Status s = locate_attr(kind, h, key, KeyUse::Get, &rec);
    if (s != Status::Ok) return {s, 0};
    if (!rec) {
      *flag = 0;
      if (truncated) *truncated = false;
      return {};
    }
    const Read r = translate(repr_of(*rec), rec->value.load(std::memory_order_relaxed),
                             cell_at(rec->cell()), as);
    store_out(as, out, r.word);
    *flag = 1;
    if (truncated) *truncated = r.truncated;
    return {};
  }

  // The lock-free read: no store to shared memory, validated by the sequence counter.
  Result get_attr(ObjectKind kind, Handle h, KeyvalId key, Binding as, void* out, int* flag,
                  bool* truncated) const {
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    if (!out || !flag) return {Status::NullArgument, 0};
    for (int attempt = 0; attempt < 16; ++attempt) {
      const std::uint64_t s1 = seq_.load(std::memory_order_acquire);
      if (s1 & 1) {
        cpu_relax();
        continue;
      }
      // (The null handle is never registered: it misses here and the locked path names it.)
      const std::uint32_t slot = map_.load(std::memory_order_acquire)->find(kind, h);
      const ObjectSlot* o = slot == UINT32_MAX ? nullptr : objects_.find(slot);
      if (!o) break;  // unknown object: classify under the lock
      // The keyval: a live user keyval of this kind, or a predefined one.
      const KeyvalSlot* k = slot_of(key);
      if (!(k && k->id.load(std::memory_order_relaxed) == key &&
            k->state.load(std::memory_order_relaxed) == kKeyAlive &&
            k->kind.load(std::memory_order_relaxed) == static_cast<std::uint8_t>(kind))) {
        const PredefinedKeyval* p = find_predefined(key);
        if (!p || p->kind.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(kind) ||
            key == config.keyval_invalid)
          break;
      }
      const AttrTable* t = o->table.load(std::memory_order_acquire);
      bool found = false;
      std::uint64_t word = 0;
      std::uint32_t meta = 0;
      if (t) {
        std::uint32_t i = t->home(key);
        for (std::uint32_t n = 0; n <= t->mask; ++n, i = (i + 1) & t->mask) {
          const KeyvalId rk = t->recs[i].key.load(std::memory_order_relaxed);
          if (rk == kEmptyKey) break;
          if (rk == key) {
            found = true;
            meta = t->recs[i].meta.load(std::memory_order_relaxed);
            word = t->recs[i].value.load(std::memory_order_relaxed);
            break;
          }
        }
      }
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) != s1) continue;
      if (!found) {
        *flag = 0;
        if (truncated) *truncated = false;
        return {};
      }
      // Consistent: `cell` belongs to this attribute. A C read of a Fortran value only needs the
      // cell's address; the word itself is already in `word`.
      const Read r = translate(static_cast<Binding>(meta & kMetaReprMask), word, cell_at(meta >> kMetaCellShift), as);
      store_out(as, out, r.word);
      *flag = 1;
      if (truncated) *truncated = r.truncated;
      return {};
    }
    return get_attr_locked(kind, h, key, as, out, flag, truncated);
  }

  // Engine::check_delete: delete_attr's checks, nothing changed.
  Result check_delete(ObjectKind kind, Handle h, KeyvalId key, int* present) const {
    Lock lk(mu_);
    const AttrRec* rec = nullptr;
    const Status s = locate_attr(kind, h, key, KeyUse::Delete, &rec);
    *present = s == Status::Ok && rec ? 1 : 0;
    return {s, 0};
  }

  Result delete_attr(ObjectKind kind, Handle h, KeyvalId key) {
    Lock lk(mu_);
    std::uint32_t slot;
    KeyvalSlot* k;
    const PredefinedKeyval* pre;
    const Status s = acquire_object(lk, kind, h, key, true, &slot, &k, &pre, KeyUse::Delete);
    if (s != Status::Ok) return {s, 0};
    ObjectSlot* o = objects_.get(slot);
    AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), key);
    if (!rec) return {Status::AttrAbsent, 0};
    if (k->spec.del.action == DeleteAction::NullDelete) {  // nothing to call: erase in place
      {
        WriteSection ws(seq_);
        erase_attr(o, rec);
      }
      --k->attributes;
      unref_keyval(k);
      return {};
    }
    o->mutating = this_thread_token();
    const Result r = delete_one(lk, slot, o, key, CallbackCause::Delete);
    o->mutating = nullptr;
    return r;
  }

  Result install_predefined(ObjectKind kind, Handle h, KeyvalId key, Binding repr, std::uint64_t value) {
    Lock lk(mu_);
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    std::uint32_t slot;
    Status s = find_object(kind, h, &slot);
    if (s != Status::Ok) return {s, 0};
    const PredefinedKeyval* p = find_predefined(key);
    if (!p) return {Status::KeyvalUnknown, 0};
    if (p->kind.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(kind))
      return {Status::KeyvalKindMismatch, 0};
    return {put(objects_.get(slot), key, repr, normalise(repr, value), true, 0), 0};
  }

  // One attribute to copy on dup, snapshotted under the lock.
  struct CopyJob {
    KeyvalId key;
    KeyvalSlot* keyval;  // pinned; nullptr for predefined
    Binding repr;
    std::uint64_t word;
    std::uint64_t value_in;  // translated for a User callback
  };

  Result dup_object(ObjectKind kind, Handle old_h, Handle new_h, Origin origin) {
    Lock lk(mu_);
    std::uint32_t old_slot;
    for (;;) {
      if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
      Status s = find_object(kind, old_h, &old_slot);
      if (s != Status::Ok) return {s, 0};
      std::uint32_t existing;
      s = find_object(kind, new_h, &existing);
      if (s == Status::ObjectNull) return {s, 0};
      if (s == Status::Ok) return {Status::ObjectExists, 0};
      const ObjectSlot* old = objects_.get(old_slot);
      if (old->mutating && old->mutating != this_thread_token()) {
        wait_turn(lk);
        continue;
      }
      break;
    }
    // Hold the old object for the whole dup: another thread that modifies it waits until the
    // copies are made, so no copy callback ever sees a value whose delete callback already ran.
    ObjectSlot* old = objects_.get(old_slot);
    const void* old_holder = old->mutating;  // this thread, further out, or nobody
    old->mutating = this_thread_token();
    // Snapshot what is to be copied, oldest first, pinning the keyvals. Attributes whose copy
    // action is NullCopy are skipped without further work.
    std::vector<std::pair<std::uint32_t, CopyJob>> ordered;
    if (const AttrTable* t = old->table.load(std::memory_order_relaxed)) {
      ordered.reserve(t->count);
      for (std::uint32_t i = 0; i <= t->mask; ++i) {
        const AttrRec& rec = t->recs[i];
        const KeyvalId key = rec.key.load(std::memory_order_relaxed);
        if (key == kEmptyKey) continue;
        CopyJob job{key, nullptr, repr_of(rec), rec.value.load(std::memory_order_relaxed), 0};
        if (predefined_rec(rec)) {
          const PredefinedKeyval* p = find_predefined(key);
          if (!p || !p->copy_on_dup) continue;
        } else {
          KeyvalSlot* k = slot_of(key);
          if (k->spec.copy.action == CopyAction::NullCopy) continue;
          ++k->pins;
          job.keyval = k;
          if (k->spec.copy.action == CopyAction::User)
            job.value_in = translate(job.repr, job.word, cell_at(rec.cell()), k->spec.lang).word;
        }
        ordered.emplace_back(rec.order, job);
      }
      std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    std::vector<CopyJob> jobs;
    jobs.reserve(ordered.size());
    for (const auto& entry : ordered) jobs.push_back(entry.second);
    const std::uint32_t new_slot = register_object(kind, new_h, kObjectNone, origin);
    if (new_slot == UINT32_MAX) {
      for (const CopyJob& job : jobs) unpin(job.keyval);
      old->mutating = old_holder;
      return {Status::CapacityExhausted, 0};
    }
    ObjectSlot* fresh = objects_.get(new_slot);
    fresh->mutating = this_thread_token();
    reserve(fresh, static_cast<std::uint32_t>(jobs.size()));

    Result failure;
    std::size_t next = 0;
    for (; next < jobs.size(); ++next) {
      const CopyJob& job = jobs[next];
      Binding repr = job.repr;
      std::uint64_t word = job.word;
      if (job.keyval && job.keyval->spec.copy.action == CopyAction::User) {
        const KeyvalSpec spec = job.keyval->spec;
        const CopyCall call{kind, old_h, job.key, spec.lang, spec.copy.fn, spec.extra_state, job.value_in};
        lk.unlock();
        std::uint64_t out = 0;
        int flag = 0, rc = 0;
        bool threw = false;
        {
          FrameGuard frame(this, old_slot);
          try {
            rc = config.invoker->copy(call, &out, &flag);
          } catch (...) {
            threw = true;
          }
        }
        notify(CallbackEvent{CallbackEvent::Which::Copy, CallbackCause::Dup, kind, old_h, job.key, rc, flag, threw});
        lk.lock();
        if (threw || rc != 0) {
          failure = threw ? Result{Status::CallbackThrew, 0} : Result{Status::CallbackFailed, rc};
          break;
        }
        if (flag == 0) continue;
        repr = spec.lang;
        word = normalise(repr, out);
      }
      const Status ps = put(fresh, job.key, repr, word, job.keyval == nullptr, origin);
      if (ps != Status::Ok) {
        failure = {ps, 0};
        break;
      }
      if (job.keyval) ++job.keyval->attributes;
    }
    // The copying is over: rollback callbacks run for the new object only, so the old one may be
    // modified from inside them (docs/engine.md, "Callbacks and re-entrance").
    old->mutating = old_holder;
    if (!failure.ok()) {
      // Undo: delete what was copied (newest first), then forget the new object.
      delete_all(lk, new_slot, CallbackCause::DupRollback, false, nullptr);
      // Attributes whose rollback callback failed still reference their keyvals: drop them.
      drop_attribute_refs(fresh);
      unregister_object(new_slot);
    } else {
      fresh->mutating = nullptr;
    }
    for (const CopyJob& job : jobs) unpin(job.keyval);
    return failure;
  }

  Result free_object(ObjectKind kind, Handle h) {
    Lock lk(mu_);
    std::uint32_t slot;
    for (;;) {
      if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
      const Status s = find_object(kind, h, &slot);
      if (s != Status::Ok) return {s, 0};
      ObjectSlot* o = objects_.get(slot);
      if (o->flags & kObjectPredefined) return {Status::ObjectPredefined, 0};
      if (in_callback_for(this, slot)) return {Status::Reentrant, 0};
      if (o->mutating && o->mutating != this_thread_token()) {
        wait_turn(lk);
        continue;
      }
      if (o->mutating) return {Status::Reentrant, 0};
      break;
    }
    ObjectSlot* o = objects_.get(slot);
    if (!has_user_delete(o)) {  // nothing to call: release the keyvals and drop the object at once
      drop_attribute_refs(o);
      unregister_object(slot);
      return {};
    }
    o->mutating = this_thread_token();
    const Result r = delete_all(lk, slot, CallbackCause::Free, true, nullptr);
    if (!r.ok()) {
      o->mutating = nullptr;
      return r;
    }
    unregister_object(slot);
    return {};
  }

  Result forget_object(ObjectKind kind, Handle h) {
    Lock lk(mu_);
    std::uint32_t slot;
    for (;;) {
      const Status s = find_object(kind, h, &slot);
      if (s != Status::Ok) return {s, 0};
      const ObjectSlot* o = objects_.get(slot);
      if (!o->mutating) break;
      if (o->mutating == this_thread_token()) return {Status::Reentrant, 0};
      wait_turn(lk);
    }
    drop_attribute_refs(objects_.get(slot));
    unregister_object(slot);
    return {};
  }

  // Releases the keyval references of every attribute of an object about to be unregistered.
  void drop_attribute_refs(const ObjectSlot* o) {
    const AttrTable* t = o->table.load(std::memory_order_relaxed);
    if (!t) return;
    for (std::uint32_t i = 0; i <= t->mask; ++i) {
      const AttrRec& rec = t->recs[i];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      if (key == kEmptyKey || predefined_rec(rec)) continue;
      if (KeyvalSlot* ks = slot_of(key)) {
        --ks->attributes;
        unref_keyval(ks);
      }
    }
  }

  // Whether any attribute of the object has a user delete callback to run.
  bool has_user_delete(const ObjectSlot* o) const noexcept {
    const AttrTable* t = o->table.load(std::memory_order_relaxed);
    if (!t) return false;
    for (std::uint32_t i = 0; i <= t->mask; ++i) {
      const AttrRec& rec = t->recs[i];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      if (key == kEmptyKey || predefined_rec(rec)) continue;
      const KeyvalSlot* ks = slot_of(key);
      if (ks && ks->spec.del.action == DeleteAction::User) return true;
    }
    return false;
  }

  FinalizeReport finalize(const FinalizeOptions& options) {
    FinalizeReport report;
    Lock lk(mu_);
    if (finalized_.load(std::memory_order_relaxed)) return report;
    for (std::uint8_t flag : {std::uint8_t{kObjectSelf}, std::uint8_t{kObjectWorld}}) {
      if (flag == kObjectWorld && !options.delete_world_attributes) continue;
      std::vector<std::uint32_t> slots;
      for (std::uint32_t i = 0; i < object_count_; ++i) {
        const ObjectSlot* o = objects_.get(i);
        if (o->live && (o->flags & flag)) slots.push_back(i);
      }
      for (std::uint32_t slot : slots) {
        ObjectSlot* o = objects_.get(slot);
        while (o->mutating && o->mutating != this_thread_token()) wait_turn(lk);
        if (!o->live) continue;
        const void* previous = o->mutating;
        o->mutating = this_thread_token();
        delete_all(lk, slot, CallbackCause::Finalize, false, &report.failures);
        o->mutating = previous;
      }
    }
    {
      WriteSection ws(seq_, &layout_);
      finalized_.store(true, std::memory_order_release);
    }
    return report;
  }

  // ---- introspection -----------------------------------------------------------------------

  KeyvalInfo info_of(const KeyvalSlot& k) const {
    KeyvalInfo info;
    info.id = k.id.load(std::memory_order_relaxed);
    info.kind = k.spec.kind;
    const std::uint8_t state = k.state.load(std::memory_order_relaxed);
    info.user_freed = state == kKeyFreed || state == kKeyDestroyed;
    info.destroyed = state == kKeyDestroyed;
    info.attributes = k.attributes;
    info.spec = k.spec;
    info.created_at = k.created_at;
    info.freed_at = k.freed_at;
    return info;
  }

  bool keyval_info(KeyvalId id, KeyvalInfo* out) const {
    if (!out) return false;
    Lock lk(mu_);
    if (const PredefinedKeyval* p = find_predefined(id)) {
      *out = KeyvalInfo{};
      out->id = id;
      out->kind = static_cast<ObjectKind>(p->kind.load(std::memory_order_relaxed));
      out->predefined = true;
      out->spec.kind = out->kind;
      out->name = p->name;
      return true;
    }
    const KeyvalSlot* k = slot_of(id);
    if (!k || k->id.load(std::memory_order_relaxed) != id || k->state.load(std::memory_order_relaxed) == kKeyEmpty)
      return false;
    *out = info_of(*k);
    return true;
  }

  template <typename Pred>
  std::vector<KeyvalInfo> keyvals_where(Pred pred) const {
    Lock lk(mu_);
    std::vector<KeyvalInfo> out;
    for (std::uint32_t i = 1; i < keyval_slots_used_; ++i) {
      const KeyvalSlot* k = keyvals_.find(i);
      if (!k) continue;
      const std::uint8_t state = k->state.load(std::memory_order_relaxed);
      if (state == kKeyEmpty || state == kKeyDestroyed) continue;
      if (pred(state)) out.push_back(info_of(*k));
    }
    return out;
  }

  void collect_attributes(const ObjectSlot& o, std::vector<AttributeInfo>* out) const {
    const AttrTable* t = o.table.load(std::memory_order_relaxed);
    if (!t) return;
    const std::size_t first = out->size();
    for (std::uint32_t i = 0; i <= t->mask; ++i) {
      const AttrRec& rec = t->recs[i];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      if (key == kEmptyKey) continue;
      AttributeInfo a{};
      a.kind = o.kind;
      a.object = o.handle;
      a.keyval = key;
      a.repr = repr_of(rec);
      a.value = rec.value.load(std::memory_order_relaxed);
      a.order = rec.order;
      a.predefined = predefined_rec(rec);
      a.set_at = rec.set_at;
      a.object_created_at = o.created_at;
      a.object_flags = o.flags;
      a.delete_action = DeleteAction::NullDelete;
      if (!a.predefined)
        if (const KeyvalSlot* k = slot_of(key)) a.delete_action = k->spec.del.action;
      out->push_back(a);
    }
    std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(),
              [](const AttributeInfo& x, const AttributeInfo& y) { return x.order < y.order; });
  }
};

// ---------------------------------------------------------------------------------------------
// Public interface: thin forwarding.
// ---------------------------------------------------------------------------------------------

Engine::Engine(const EngineConfig& config) : impl_(std::make_unique<Impl>(config)) {}
Engine::~Engine() = default;

Result Engine::create_keyval(const KeyvalSpec& spec, KeyvalId* keyval, Origin origin) {
  return impl_->create_keyval(spec, keyval, origin);
}
Result Engine::free_keyval(ObjectKind kind, KeyvalId* keyval, Origin origin) {
  return impl_->free_keyval(kind, keyval, origin);
}
Result Engine::register_predefined_keyval(ObjectKind kind, KeyvalId id, const char* name, bool copy_on_dup) {
  return impl_->register_predefined(kind, id, name, copy_on_dup);
}
Result Engine::create_object(ObjectKind kind, Handle handle, std::uint8_t flags, Origin origin) {
  return impl_->create_object(kind, handle, flags, origin);
}
Result Engine::dup_object(ObjectKind kind, Handle old_handle, Handle new_handle, Origin origin) {
  return impl_->dup_object(kind, old_handle, new_handle, origin);
}
Result Engine::free_object(ObjectKind kind, Handle handle, Origin) { return impl_->free_object(kind, handle); }
Result Engine::forget_object(ObjectKind kind, Handle handle) { return impl_->forget_object(kind, handle); }
Result Engine::set_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Binding from, std::uint64_t value,
                        Origin origin) {
  return impl_->set_attr(kind, handle, keyval, from, value, origin);
}
bool Engine::find_set_cursor(ObjectKind kind, Handle handle, KeyvalId keyval, std::uint64_t layout,
                             SetCursor* out, bool* user_delete) const {
  return impl_->find_set_cursor(kind, handle, keyval, layout, out, user_delete);
}
bool Engine::set_attr_ran(const SetCursor& cursor, Binding from, std::uint64_t value, Origin origin,
                          const RanDelete* ran, std::uint64_t* version) {
  return impl_->set_attr_ran(cursor, from, value, origin, ran, version);
}
Result Engine::get_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Binding as, void* attribute_val,
                        int* flag, bool* truncated) const {
  return impl_->get_attr(kind, handle, keyval, as, attribute_val, flag, truncated);
}
Result Engine::delete_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Origin) {
  return impl_->delete_attr(kind, handle, keyval);
}
Result Engine::check_delete(ObjectKind kind, Handle handle, KeyvalId keyval, int* present) const {
  int local = 0;
  return impl_->check_delete(kind, handle, keyval, present ? present : &local);
}
Result Engine::install_predefined(ObjectKind kind, Handle handle, KeyvalId keyval, Binding repr,
                                  std::uint64_t value) {
  return impl_->install_predefined(kind, handle, keyval, repr, value);
}
FinalizeReport Engine::finalize(const FinalizeOptions& options) { return impl_->finalize(options); }
bool Engine::finalized() const noexcept { return impl_->finalized_.load(std::memory_order_acquire); }
std::uint64_t Engine::version() const noexcept { return impl_->seq_.load(std::memory_order_acquire); }
std::uint64_t Engine::layout_version() const noexcept { return impl_->layout_.load(std::memory_order_acquire); }
void Engine::drop_locking() {
  Lock lk(impl_->mu_);  // (a caller still inside finishes first; then no lock is taken again)
  lk.unlock();
  impl_->mu_.disable();
}
void Engine::advance_layout() {
  Lock lk(impl_->mu_);
  WriteSection ws(impl_->seq_, &impl_->layout_);
}
const std::atomic<std::uint64_t>* Engine::version_counter() const noexcept { return &impl_->seq_; }
const std::atomic<std::uint64_t>* Engine::layout_counter() const noexcept { return &impl_->layout_; }

bool Engine::keyval_info(KeyvalId id, KeyvalInfo* out) const { return impl_->keyval_info(id, out); }
std::vector<KeyvalInfo> Engine::live_keyvals() const {
  return impl_->keyvals_where([](std::uint8_t) { return true; });
}
std::vector<KeyvalInfo> Engine::leaked_keyvals() const {
  return impl_->keyvals_where([](std::uint8_t state) { return state == kKeyAlive; });
}
std::vector<AttributeInfo> Engine::attributes() const {
  Lock lk(impl_->mu_);
  std::vector<AttributeInfo> out;
  for (std::uint32_t i = 0; i < impl_->object_count_; ++i) {
    const ObjectSlot* o = impl_->objects_.find(i);
    if (o && o->live) impl_->collect_attributes(*o, &out);
  }
  return out;
}
std::vector<AttributeInfo> Engine::attributes(ObjectKind kind, Handle handle) const {
  Lock lk(impl_->mu_);
  std::vector<AttributeInfo> out;
  std::uint32_t slot;
  if (impl_->find_object(kind, handle, &slot) == Status::Ok)
    impl_->collect_attributes(*impl_->objects_.find(slot), &out);
  return out;
}
std::vector<ObjectInfo> Engine::objects() const {
  Lock lk(impl_->mu_);
  std::vector<ObjectInfo> out;
  for (std::uint32_t i = 0; i < impl_->object_count_; ++i) {
    const ObjectSlot* o = impl_->objects_.find(i);
    if (!o || !o->live) continue;
    const AttrTable* t = o->table.load(std::memory_order_relaxed);
    out.push_back(ObjectInfo{o->kind, o->handle, o->flags, o->created_at, t ? t->count : 0u});
  }
  return out;
}
bool Engine::object_info(ObjectKind kind, Handle handle, ObjectInfo* out) const {
  Lock lk(impl_->mu_);
  std::uint32_t slot;
  if (!out || impl_->find_object(kind, handle, &slot) != Status::Ok) return false;
  const ObjectSlot* o = impl_->objects_.find(slot);
  const AttrTable* t = o->table.load(std::memory_order_relaxed);
  *out = ObjectInfo{o->kind, o->handle, o->flags, o->created_at, t ? t->count : 0u};
  return true;
}

bool Engine::is_engine_keyval(KeyvalId id) const noexcept {
  Lock lk(impl_->mu_);
  KeyvalSlot* k = nullptr;
  return impl_->classify_keyval(id, &k) != Status::KeyvalUnknown;
}
std::size_t Engine::attribute_bytes() const {
  Lock lk(impl_->mu_);
  std::size_t bytes = impl_->cells_in_use_ * sizeof(Cell);
  for (std::uint32_t i = 0; i < impl_->object_count_; ++i) {
    const ObjectSlot* o = impl_->objects_.find(i);
    if (!o || !o->live) continue;
    if (const AttrTable* t = o->table.load(std::memory_order_relaxed))
      bytes += sizeof(AttrTable) + std::size_t{t->capacity()} * sizeof(AttrRec);
  }
  return bytes;
}

}  // namespace attrcheck
