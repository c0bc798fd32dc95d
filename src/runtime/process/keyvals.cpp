// Keyvals as the runtime sees them: the record of each engine keyval (its callbacks, for the
// trampolines), shadow mode's map from the library's keyval numbers to the engine's, the
// predefined keyvals, and the quarantine of freed keyval numbers.
#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>


#include "attrcheck/spin_lock.hpp"
#include "runtime/process/keyvals.hpp"
#include "runtime/process/chain.hpp"

namespace attrcheck::rt {

KeyRecord* record_for(int engine_id) noexcept {
  if (engine_id <= 0) return nullptr;
  const unsigned slot = keyval_slot(engine_id);
  KeyRecord* chunk = state().records[slot / Runtime::kChunk].load(std::memory_order_acquire);
  if (!chunk) return nullptr;
  KeyRecord* rec = &chunk[slot % Runtime::kChunk];
  return rec->engine_id.load(std::memory_order_acquire) == engine_id ? rec : nullptr;
}

KeyRecord* new_record(int engine_id) {
  Runtime& r = state();
  const unsigned slot = keyval_slot(engine_id);
  std::atomic<KeyRecord*>& dir = r.records[slot / Runtime::kChunk];
  KeyRecord* chunk = dir.load(std::memory_order_acquire);
  if (!chunk) {  // only allocating a chunk needs a lock; the engine hands each slot to one keyval
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    chunk = dir.load(std::memory_order_acquire);
    if (!chunk) {
      chunk = new KeyRecord[Runtime::kChunk];
      dir.store(chunk, std::memory_order_release);
    }
  }
  KeyRecord* rec = &chunk[slot % Runtime::kChunk];
  rec->engine_id.store(0, std::memory_order_release);
  return rec;
}

namespace {
// The runtime's keyval locks (g_big_keys_mu, g_quarantine_mu) are spin locks: held for a few
// dozen instructions (a quarantine batch's bookkeeping: a few thousand), never across an MPI or
// user call. Below MPI_THREAD_MULTIPLE calls never overlap (enter() refuses other threads at
// SINGLE and FUNNELED; SERIALIZED programs promise it), so MPI's start switches them off with the
// engine's lock (drop_keyval_locking): an exchange to lock (a locked instruction) and a
// std::mutex's two made a sizeable part of a keyval create + free's time.

// Keys outside 0..kSmallKeys (MPICH's are handles such as 0xa4000000) -> engine ids, under
// g_big_keys_mu: open addressing, linear probing, key and id in one word (a key of 0 is never a
// big key, so 0 is an empty slot), doubling at half full. Nothing is ever removed: a key the
// library frees keeps naming the freed keyval until the library hands it out again, which maps it
// anew. (std::unordered_map: a node to chase per update.)
struct BigKeyMap {
  std::uint64_t* slots = nullptr;  // (never freed: usable until the process ends)
  std::uint32_t mask = 0, count = 0;

  static std::uint32_t home(std::uint32_t key) noexcept { return key * 0x9e3779b1u; }
  int find(int user_key) const noexcept {
    const auto key = static_cast<std::uint32_t>(user_key);
    if (!slots) return 0;
    for (std::uint32_t i = home(key) & mask;; i = (i + 1) & mask) {
      const std::uint64_t e = slots[i];
      if (e == 0) return 0;
      if (static_cast<std::uint32_t>(e >> 32) == key) return static_cast<int>(static_cast<std::uint32_t>(e));
    }
  }
  void put(std::uint64_t entry) {
    if (!slots || 2 * (count + 1) > mask + 1) grow();
    const auto key = static_cast<std::uint32_t>(entry >> 32);
    std::uint32_t i = home(key) & mask;
    for (; slots[i] != 0; i = (i + 1) & mask)
      if (static_cast<std::uint32_t>(slots[i] >> 32) == key) {
        slots[i] = entry;
        return;
      }
    slots[i] = entry;
    ++count;
  }
  void grow() {
    const std::uint32_t old_capacity = slots ? mask + 1 : 0;
    std::uint64_t* old = slots;
    slots = new std::uint64_t[old_capacity ? 2 * old_capacity : 64]();
    mask = (old_capacity ? 2 * old_capacity : 64) - 1;
    count = 0;
    for (std::uint32_t i = 0; i < old_capacity; ++i)
      if (old[i]) put(old[i]);
    delete[] old;
  }
};
SpinLock g_big_keys_mu;
BigKeyMap g_big_keys;

// In front of it, lock-free: the entry of the key last mapped or looked up in each slot (0:
// empty). Written under g_big_keys_mu only, so it never disagrees with the map for longer than
// the map's own update.
constexpr int kBigKeyCacheBits = 12;
std::atomic<std::uint64_t> g_big_key_cache[1 << kBigKeyCacheBits];

std::atomic<std::uint64_t>& big_key_slot(int user_key) noexcept {
  return g_big_key_cache[(static_cast<std::uint32_t>(user_key) * 0x9e3779b1u) >> (32 - kBigKeyCacheBits)];
}
std::uint64_t big_key_entry(int user_key, int engine_id) noexcept {
  return (std::uint64_t{static_cast<std::uint32_t>(user_key)} << 32) | static_cast<std::uint32_t>(engine_id);
}
}  // namespace

int to_engine_key_shadow(int user_key) noexcept {
  Runtime& r = state();
  if (user_key == MPI_KEYVAL_INVALID || is_predefined_key(user_key)) return user_key;
  int id = 0;
  if (user_key >= 0 && user_key < Runtime::kSmallKeys) {
    id = r.small_keys[user_key].load(std::memory_order_acquire);
  } else if (const std::uint64_t e = big_key_slot(user_key).load(std::memory_order_acquire);
             static_cast<std::uint32_t>(e >> 32) == static_cast<std::uint32_t>(user_key)) {
    id = static_cast<int>(static_cast<std::uint32_t>(e));
  } else {
    std::lock_guard<SpinLock> lock(g_big_keys_mu);
    id = g_big_keys.find(user_key);
    if (id) big_key_slot(user_key).store(big_key_entry(user_key, id), std::memory_order_release);
  }
  return id ? id : (1 << kKeyvalSlotBits);  // slot 0 is never an engine keyval: "unknown"
}

void map_key(int user_key, int engine_id) noexcept {
  Runtime& r = state();
  if (user_key >= 0 && user_key < Runtime::kSmallKeys) {
    r.small_keys[user_key].store(engine_id, std::memory_order_release);
  } else {
    const std::uint64_t entry = big_key_entry(user_key, engine_id);
    std::lock_guard<SpinLock> lock(g_big_keys_mu);
    g_big_keys.put(entry);
    big_key_slot(user_key).store(entry, std::memory_order_release);
  }
  r.engine->advance_layout();  // queries remembered with the old mapping are void
}

namespace {
struct PredefinedKey {
  int id;
  ObjectKind kind;
  const char* name;
};
constexpr PredefinedKey kPredefinedKeys[] = {
    {MPI_TAG_UB, ObjectKind::Comm, "MPI_TAG_UB"},
    {MPI_HOST, ObjectKind::Comm, "MPI_HOST"},
    {MPI_IO, ObjectKind::Comm, "MPI_IO"},
    {MPI_WTIME_IS_GLOBAL, ObjectKind::Comm, "MPI_WTIME_IS_GLOBAL"},
    {MPI_APPNUM, ObjectKind::Comm, "MPI_APPNUM"},
    {MPI_UNIVERSE_SIZE, ObjectKind::Comm, "MPI_UNIVERSE_SIZE"},
    {MPI_LASTUSEDCODE, ObjectKind::Comm, "MPI_LASTUSEDCODE"},
    {MPI_WIN_BASE, ObjectKind::Win, "MPI_WIN_BASE"},
    {MPI_WIN_SIZE, ObjectKind::Win, "MPI_WIN_SIZE"},
    {MPI_WIN_DISP_UNIT, ObjectKind::Win, "MPI_WIN_DISP_UNIT"},
    {MPI_WIN_CREATE_FLAVOR, ObjectKind::Win, "MPI_WIN_CREATE_FLAVOR"},
    {MPI_WIN_MODEL, ObjectKind::Win, "MPI_WIN_MODEL"},
};
}  // namespace

// Open MPI numbers them 0..11: one bit test on the hot path; other libraries scan the table.
constexpr std::uint64_t predefined_bits() {
  std::uint64_t bits = 0;
  for (const PredefinedKey& p : kPredefinedKeys)
    if (p.id >= 0 && p.id < 64) bits |= std::uint64_t{1} << p.id;
  return bits;
}
constexpr bool predefined_outside_bits() {
  for (const PredefinedKey& p : kPredefinedKeys)
    if (p.id < 0 || p.id >= 64) return true;
  return false;
}
// The range the others span (MPICH: 0x64400001..0x66000009; a user key, 0xa4000000 and up as a
// negative int, and MPI_KEYVAL_INVALID fall outside it): two compares before the scan.
constexpr int predefined_outside_bound(bool high) {
  int bound = high ? INT_MIN : INT_MAX;
  for (const PredefinedKey& p : kPredefinedKeys)
    if (p.id < 0 || p.id >= 64) bound = high ? std::max(bound, p.id) : std::min(bound, p.id);
  return bound;
}
const std::uint64_t g_predefined_small = predefined_bits();
const bool g_predefined_large = predefined_outside_bits();
const int g_predefined_low = predefined_outside_bound(false);
const int g_predefined_high = predefined_outside_bound(true);

bool is_predefined_key_slow(int key) noexcept {
  for (const PredefinedKey& p : kPredefinedKeys)
    if (p.id == key) return true;
  return false;
}

void register_predefined_keys(Engine& e) {
  for (const PredefinedKey& p : kPredefinedKeys) e.register_predefined_keyval(p.kind, p.id, p.name);
}

// ---- the quarantine (shadow mode) ---------------------------------------------------------------
// A library hands a freed keyval's number to the next key created (Open MPI at once), and a stale
// copy of the old key then names the new one: the tool would see a legal call. So the tool holds
// the library's free of a key back until at least kQuarantineHold later frees have been made:
// meanwhile the number stays taken in the library, and the tool still maps it to the freed engine
// keyval, so a stale use is keyval.freed. Holding the free back changes nothing the program can
// observe: the library keeps a freed key alive while attributes use it anyway, and deletes through
// it (the only legal use left) work the same.
//
// Once its quarantine is over, a held key is handed out again, as it is, to the next create that
// would give the library the same arguments (LibraryArgs: the same create function, the same
// copy and delete functions, the same extra_state), instead of the library's free of the old key
// and create of a new one. The library cannot tell: it never saw the old key freed, and the key
// it holds is the one its create would have made, field for field (Open MPI: kind, functions,
// extra_state, the Fortran flags its create function sets; MPICH the same, with its language).
// For C user callbacks the library's extra_state is the keyval's KeyRecord, which belongs to the
// engine's slot: the engine keeps a freed keyval's slot for this (Engine::free_keyval keep_slot)
// and renews the new keyval in it (Engine::renew_keyval), so the new keyval's record is the one the
// library already has. It is only done when the old keyval is destroyed (no attribute uses it any
// more, so the library has none under the key). What the program sees: its new keyval's number is
// an old one, freed at least kQuarantineHold frees ago, where the library's create would have
// given it the lowest number free (which the quarantine already changes); the guarantee is the
// same (a stale key names a new one only after kQuarantineHold later frees). What it saves: the
// library's create and free (Open MPI's search for the lowest free bit and its hash table, both
// slower the more keys are held). docs/rules.md, keyval.freed, says why the library cannot tell.
//
// Aged keys no create has taken wait in the ready set, at most kQuarantineBatch of them, then all
// are released to the library together, highest number first. Open MPI keeps its keyvals in an
// opal_hash_table hashed by the number itself (key % capacity, linear probing), and a removal
// re-examines every valid entry after the removed one up to the next empty slot. Since it hands
// out the lowest free number, the held and live keys form one contiguous run of numbers, and
// releasing the oldest held key one at a time scanned about half of that run on every free.
// Released from the highest number down, each removal's scan stops at the gap the previous one
// left: one batch scans the run once. MPICH's keyval free is O(1) either way.

namespace {
constexpr int kQuarantineHold = 4096;
constexpr int kQuarantineBatch = 512;
struct Held {
  ObjectKind kind;
  int key;        // the library's
  int engine_id;  // the engine keyval it named, whose slot the engine keeps
};
SpinLock g_quarantine_mu;  // (see g_big_keys_mu)
// The last kQuarantineHold keys freed, oldest first.
Held g_ring[kQuarantineHold];
int g_held = 0, g_oldest = 0;

// The ready set: aged keys with the arguments the library's create got, chained by bucket (a hash
// of the arguments). Entries are taken from a free list; `next` links a bucket's chain or the free
// list (-1: end).
struct Ready {
  Held held;
  LibraryArgs args;
  int next;
};
constexpr int kBuckets = 64;
constexpr int kChainSteps = 4;  // a create looks this far down its bucket's chain, no further
Ready g_ready[kQuarantineBatch];
int g_bucket[kBuckets];
int g_free_ready = -1;
bool g_ready_built = false;
std::atomic<int> g_ready_count{0};  // read without the lock: a create with none ready skips it

bool same_args(const LibraryArgs& a, const LibraryArgs& b) noexcept {
  return a.api == b.api && a.copy_fn == b.copy_fn && a.delete_fn == b.delete_fn && a.own_record == b.own_record &&
         (a.own_record || a.extra_state == b.extra_state);
}

int bucket_of(const LibraryArgs& a) noexcept {
  std::uint64_t h = reinterpret_cast<std::uintptr_t>(a.api) ^ (reinterpret_cast<std::uintptr_t>(a.copy_fn) * 3) ^
                    (reinterpret_cast<std::uintptr_t>(a.delete_fn) * 5) ^ (a.own_record ? 1 : a.extra_state * 7);
  return static_cast<int>((h * 0x9e3779b97f4a7c15ULL) >> 58);
}
static_assert(kBuckets == 64, "bucket_of takes the top 6 bits");

void build_ready() noexcept {  // g_quarantine_mu held
  if (g_ready_built) return;
  for (int& b : g_bucket) b = -1;
  for (int i = 0; i < kQuarantineBatch; ++i) g_ready[i].next = i + 1 < kQuarantineBatch ? i + 1 : -1;
  g_free_ready = 0;
  g_ready_built = true;
}

// Takes every ready key off the set into `batch` (g_quarantine_mu held); returns how many.
int take_all_ready(Held* batch) noexcept {
  int n = 0;
  for (int& head : g_bucket) {
    for (int i = head; i >= 0;) {
      const int next = g_ready[i].next;
      batch[n++] = g_ready[i].held;
      g_ready[i].next = g_free_ready;
      g_free_ready = i;
      i = next;
    }
    head = -1;
  }
  g_ready_count.store(0, std::memory_order_relaxed);
  return n;
}

// Adds an aged key (g_quarantine_mu held; the set is not full).
void add_ready(Held h, const LibraryArgs& args) noexcept {
  const int i = g_free_ready;
  g_free_ready = g_ready[i].next;
  g_ready[i].held = h;
  g_ready[i].args = args;
  int& head = g_bucket[bucket_of(args)];
  g_ready[i].next = head;
  head = i;
  g_ready_count.store(g_ready_count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void library_free_keyval(Held h) noexcept {
  int key = h.key;
  switch (h.kind) {
    // (The program's free, made now: through a tool after attrcheck, which sees it as alone.)
    case ObjectKind::Comm: forward<&PMPI_Comm_free_keyval>(chain::next_MPI_Comm_free_keyval, "PMPI_Comm_free_keyval", &key); break;
    case ObjectKind::Type: forward<&PMPI_Type_free_keyval>(chain::next_MPI_Type_free_keyval, "PMPI_Type_free_keyval", &key); break;
    case ObjectKind::Win: forward<&PMPI_Win_free_keyval>(chain::next_MPI_Win_free_keyval, "PMPI_Win_free_keyval", &key); break;
  }
  state().engine->release_keyval_slot(h.engine_id);  // the record is no longer the library's
}

// The library's frees of a batch of held keys, highest number first (see above).
void release(Held* batch, int n) noexcept {
  std::sort(batch, batch + n, [](const Held& a, const Held& b) { return a.key > b.key; });
  for (int i = 0; i < n; ++i) library_free_keyval(batch[i]);
}
}  // namespace

void quarantine_keyval(ObjectKind kind, int user_key, int engine_id) noexcept {
  Held batch[kQuarantineBatch + 1];  // 6 KiB of stack, only while a batch is released
  int n = 0;
  {
    std::lock_guard<SpinLock> lock(g_quarantine_mu);
    const Held freed{kind, user_key, engine_id};
    if (g_held < kQuarantineHold) {
      g_ring[(g_oldest + g_held++) % kQuarantineHold] = freed;
    } else {  // the oldest has had kQuarantineHold later frees: it is ready
      const Held aged = g_ring[g_oldest];
      g_ring[g_oldest] = freed;
      g_oldest = (g_oldest + 1) % kQuarantineHold;
      build_ready();
      if (g_ready_count.load(std::memory_order_relaxed) == kQuarantineBatch) n = take_all_ready(batch);
      // Its record, kept with the engine's slot, says what the library's create got (none: the
      // engine did not keep the slot, at a lowered capacity; then it is released as it is).
      // A key the library may hold an attribute under on an object the tool never saw made is
      // released as it is (KeyRecord::unseen_copy).
      const KeyRecord* rec = record_for(aged.engine_id);
      if (rec && !rec->unseen_copy.load(std::memory_order_relaxed)) add_ready(aged, rec->library);
      else batch[n++] = aged;
    }
  }
  if (n) release(batch, n);  // outside the lock: other threads' frees go on being held meanwhile
}

bool reuse_held_keyval(const LibraryArgs& args, const KeyvalSpec& spec, Origin origin, int* user_key,
                       int* engine_id) noexcept {
  if (g_ready_count.load(std::memory_order_relaxed) == 0) return false;
  // Past a tool limit, objects the engine could not register hold attributes it never counted: a
  // key the engine calls unused may not be unused in the library. Held keys go back to it then.
  if (state().limited.load(std::memory_order_relaxed)) return false;
  Held h;
  {
    std::lock_guard<SpinLock> lock(g_quarantine_mu);
    int* link = &g_bucket[bucket_of(args)];
    for (int steps = 0; *link >= 0 && !same_args(g_ready[*link].args, args); ++steps) {
      if (steps == kChainSteps) return false;
      link = &g_ready[*link].next;
    }
    const int i = *link;
    if (i < 0) return false;
    h = g_ready[i].held;
    *link = g_ready[i].next;
    g_ready[i].next = g_free_ready;
    g_free_ready = i;
    g_ready_count.store(g_ready_count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }
  if (state().engine->renew_keyval(h.engine_id, spec, engine_id, origin).ok()) {
    *user_key = h.key;
    return true;
  }
  // Attributes still use the old keyval (or the engine gave its slot up): the library frees the
  // key as the batch would have, and the caller creates one.
  library_free_keyval(h);
  return false;
}

void release_quarantine() noexcept {
  Held batch[kQuarantineBatch];
  for (;;) {
    int n = 0;
    {
      std::lock_guard<SpinLock> lock(g_quarantine_mu);
      if (g_ready_built && g_ready_count.load(std::memory_order_relaxed) > 0) {
        n = take_all_ready(batch);
      } else {
        while (n < kQuarantineBatch && g_held > 0) {
          batch[n++] = g_ring[g_oldest];
          g_oldest = (g_oldest + 1) % kQuarantineHold;
          --g_held;
        }
      }
    }
    if (n == 0) return;
    release(batch, n);
  }
}

void drop_keyval_locking() noexcept {
  g_big_keys_mu.disable();
  g_quarantine_mu.disable();
}

}  // namespace attrcheck::rt
