// Keyvals as the runtime sees them: the record of each engine keyval (its callbacks, for the
// trampolines), shadow mode's map from the library's keyval numbers to the engine's, the
// predefined keyvals, and the quarantine of freed keyval numbers.
#include <algorithm>
#include <mutex>

#include "runtime/runtime.hpp"

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

int to_engine_key_shadow(int user_key) noexcept {
  Runtime& r = state();
  if (user_key == MPI_KEYVAL_INVALID || is_predefined_key(user_key)) return user_key;
  int id = 0;
  if (user_key >= 0 && user_key < Runtime::kSmallKeys) {
    id = r.small_keys[user_key].load(std::memory_order_acquire);
  } else {
    std::lock_guard<std::mutex> lock(r.big_keys_mu);
    auto it = r.big_keys.find(user_key);
    if (it != r.big_keys.end()) id = it->second;
  }
  return id ? id : (1 << kKeyvalSlotBits);  // slot 0 is never an engine keyval: "unknown"
}

void map_key(int user_key, int engine_id) noexcept {
  Runtime& r = state();
  if (user_key >= 0 && user_key < Runtime::kSmallKeys) {
    r.small_keys[user_key].store(engine_id, std::memory_order_release);
  } else {
    std::lock_guard<std::mutex> lock(r.big_keys_mu);
    r.big_keys[user_key] = engine_id;
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
const std::uint64_t g_predefined_small = predefined_bits();
const bool g_predefined_large = predefined_outside_bits();

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
// The held keys are released in batches of kQuarantineBatch, highest number first. Open MPI keeps
// its keyvals in an opal_hash_table hashed by the number itself (key % capacity, linear probing),
// and a removal re-examines every valid entry after the removed one up to the next empty slot.
// Since it hands out the lowest free number, the held and live keys form one contiguous run of
// numbers, and releasing the oldest held key one at a time scanned about half of that run on every
// free (~31,000 instructions at 4,096 held keys). Released from the highest number down, each
// removal's scan stops at the gap the previous one left: one batch scans the run once, so a free
// pays about (hold + 2 batch) / batch entries. MPICH's keyval free is O(1) either way.
//
// The hold is a trade-off: a stale key is told apart for at least kQuarantineHold later frees, and
// the keys held make Open MPI's create and free slower (its lowest-free-bit search and the batch's
// hash removals): a create + free in the steady state costs ~3,080 instructions holding 4,096 and
// ~2,940 holding 2,048 (callgrind, bench/mpi_attr_bench, whole quarantine cycles), not worth
// halving the window for.

namespace {
constexpr int kQuarantineHold = 4096;
constexpr int kQuarantineBatch = 512;
constexpr int kQuarantine = kQuarantineHold + kQuarantineBatch;
struct Held {
  ObjectKind kind;
  int key;
};
std::mutex g_quarantine_mu;
Held g_quarantine[kQuarantine];
int g_held = 0, g_oldest = 0;

void library_free_keyval(Held h) noexcept {
  int key = h.key;
  switch (h.kind) {
    case ObjectKind::Comm: PMPI_Comm_free_keyval(&key); break;
    case ObjectKind::Type: PMPI_Type_free_keyval(&key); break;
    case ObjectKind::Win: PMPI_Win_free_keyval(&key); break;
  }
}

// Takes the oldest held key off the ring (the caller holds g_quarantine_mu; g_held > 0).
Held take_oldest() noexcept {
  const Held h = g_quarantine[g_oldest];
  g_oldest = (g_oldest + 1) % kQuarantine;
  --g_held;
  return h;
}

// The library's frees of a batch of held keys, highest number first (see above).
void release(Held* batch, int n) noexcept {
  std::sort(batch, batch + n, [](const Held& a, const Held& b) { return a.key > b.key; });
  for (int i = 0; i < n; ++i) library_free_keyval(batch[i]);
}
}  // namespace

void quarantine_keyval(ObjectKind kind, int user_key) noexcept {
  Held batch[kQuarantineBatch];  // 4 KiB of stack, only while a batch is released
  int n = 0;
  {
    std::lock_guard<std::mutex> lock(g_quarantine_mu);
    g_quarantine[(g_oldest + g_held++) % kQuarantine] = Held{kind, user_key};
    if (g_held == kQuarantine)  // each of the oldest kQuarantineBatch has had kQuarantineHold later frees
      while (n < kQuarantineBatch) batch[n++] = take_oldest();
  }
  release(batch, n);  // outside the lock: other threads' frees go on being held meanwhile
}

void release_quarantine() noexcept {
  Held batch[kQuarantineBatch];
  for (;;) {
    int n = 0;
    {
      std::lock_guard<std::mutex> lock(g_quarantine_mu);
      while (n < kQuarantineBatch && g_held > 0) batch[n++] = take_oldest();
    }
    if (n == 0) return;
    release(batch, n);
  }
}

}  // namespace attrcheck::rt
