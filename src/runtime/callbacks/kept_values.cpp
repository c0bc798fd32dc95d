// The values MPICH keeps where a replacing set should have deleted them (kept_values.hpp).
#include "runtime/callbacks/kept_values.hpp"

#include <cstring>
#include <mutex>

#include "runtime/callbacks/replay.hpp"
#include "runtime/process/keyvals.hpp"
#include "runtime/profile/mpi_profile.hpp"

namespace attrcheck::rt {

namespace {

constexpr const char* kKeeps = "replacing-set-attr-keeps-old-value";
constexpr Handle kAnyObject = ~Handle{0};  // a copy's object: the copy callback is not told it

struct Kept {
  bool used;
  ObjectKind kind;
  Handle object;
  int engine_key;
  std::uint64_t value;
};

// Few: one per replacing set that hit the library's habit, until the library deletes the value.
// Full, the oldest is forgotten (a run on it is then reported as any unknown run is).
constexpr int kCapacity = 64;
struct Table {
  std::mutex mutex;
  Kept kept[kCapacity];
  int next = 0;
};

Table& table() noexcept {
  static Table t;
  return t;
}

void remember(ObjectKind kind, Handle object, int engine_key, std::uint64_t value) noexcept {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (Kept& k : t.kept)
    if (!k.used) {
      k = Kept{true, kind, object, engine_key, value};
      return;
    }
  t.kept[t.next] = Kept{true, kind, object, engine_key, value};
  t.next = (t.next + 1) % kCapacity;
}

// The kept value matching, or nullptr; `forget`: it is gone from the library.
bool find(ObjectKind kind, Handle object, int engine_key, std::uint64_t value, bool forget) noexcept {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (Kept& k : t.kept) {
    if (!k.used || k.kind != kind || k.engine_key != engine_key || k.value != value) continue;
    if (k.object != object && k.object != kAnyObject) continue;
    if (forget) k.used = false;
    return true;
  }
  return false;
}

const char* call_name(const Call& call) noexcept { return call.api ? call.api->name : current_call_name(); }

bool listed(DivergenceSite site, const Call& call, const char* id) noexcept {
  const KnownDivergence* d = known_divergence(site, call_name(call));
  return d && !std::strcmp(d->id, id);
}

int user_key(int engine_key) noexcept {
  const KeyRecord* rec = record_for(engine_key);
  return rec ? rec->user_id : engine_key;
}

}  // namespace

void kept_value_if_known(const Call& call, ObjectKind kind, Handle object, int engine_key, std::uint64_t value) noexcept {
  if (listed(DivergenceSite::MissingCallback, call, kKeeps)) remember(kind, object, engine_key, value);
}

bool kept_value_run(const Call& call, const Observation& o, bool twice) noexcept {
  if (!release_has(release(), kKeeps)) return false;
  if (!find(o.kind, o.object, o.engine_id, o.value_in, !o.copy) && !(twice && o.kind != ObjectKind::Comm)) return false;
  if (o.copy && o.rc == MPI_SUCCESS && o.flag == 1) remember(o.kind, kAnyObject, o.engine_id, o.value_out);
  divergence(call, o.copy ? "copied a value a replacing set kept" : "deleted a value a replacing set kept", true,
             user_key(o.engine_id), DivergenceSite::KeptValue);
  return true;
}

bool kept_value_answer(const Call& call, ObjectKind kind, Handle object, int engine_key, std::uint64_t value) noexcept {
  if (!release_has(release(), kKeeps) || !find(kind, object, engine_key, value, false)) return false;
  divergence(call, "answered with a value a replacing set kept", true, user_key(engine_key), DivergenceSite::KeptValue);
  return true;
}

void hidden_object_run(const Call& call, const Observation& o) noexcept {
  if (o.copy || !known_divergence(DivergenceSite::HiddenObject, call_name(call))) return;
  divergence(call, "ran a delete callback on an object of its own", true, user_key(o.engine_id),
             DivergenceSite::HiddenObject);
}

}  // namespace attrcheck::rt
