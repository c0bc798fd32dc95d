// What the tool knows about object handles beyond the engine's registrations: handles freed
// through it (using one again is object.invalid), handles it never saw made (adopted on first
// use), and handles the library handed out again (one more reference the user must free).
//
// The tool refuses a handle only when it is certain: it saw the handle freed, no call since
// returned it, and the library has no live object with that handle (library_has_live: a program
// may get a handle on a path the tool does not see, a PMPI_ call of its own, a conversion, a
// function the library exports that is neither intercepted nor known). Every exported call that
// returns a handle the user may free is intercepted (tests/test_handle_functions.py checks the
// library's headers against wrappers/mpi.json), and a handle a copy or delete callback is running
// for is live whatever the tool saw before.
#include "runtime/process/objects.hpp"
#include "runtime/process/constructor_copies.hpp"

#include <mutex>
#include <string>
#include <unordered_set>

#include "runtime/process/findings.hpp"
#include "runtime/process/library.hpp"

namespace attrcheck::rt {

void note_limit(const char* what, const char* detail) {
  Runtime& r = state();
  static std::mutex mu;
  static std::unordered_set<std::string> noted;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!noted.insert(what).second) return;
  }
  r.limited.store(true, std::memory_order_relaxed);
  FindingInput in;
  in.rule = Rule::ToolLimit;
  in.call = what;
  in.detail = detail;
  report(in);
}

void object_limit() {
  state().objects_full.store(true, std::memory_order_relaxed);
  note_limit("objects", "attrcheck's object table is full (4,194,304 objects with attributes): calls on objects "
                        "it could not register go to the MPI library unchecked");
}

void add_unchecked_key(int key) {
  Runtime& r = state();
  std::lock_guard<std::mutex> lock(r.unchecked_mu);
  r.unchecked_keys.insert(key);
}

bool unchecked_slow(ObjectKind kind, const Handle* h, const int* key) {
  Runtime& r = state();
  if (key) {
    std::lock_guard<std::mutex> lock(r.unchecked_mu);
    if (r.unchecked_keys.count(*key)) return true;
  }
  return h && r.objects_full.load(std::memory_order_relaxed) && !live_object(kind, *h);
}

bool adopt(ObjectKind kind, Handle h, bool library_vouches) {
  // Handle 0 names no object on any library: Open MPI's handles are pointers, MPICH's carry their
  // kind in the high bits (MPI_COMM_NULL is 0x04000000). It is what Open MPI's f2c makes of a
  // freed Fortran handle, and what Open MPI leaves in the output of a failed MPI_Type_dup.
  if (h == 0) return false;
  Runtime& r = state();
  bool was_freed = false;
  {
    std::unique_lock<std::mutex> lock(r.freed_mu);
    auto& freed = r.freed[static_cast<int>(kind)];
    if (freed.contains(h)) {
      // Live after all if the library vouches for it, passed it to a callback running now, or
      // has a live object with that handle (an object made inside the library, or through a call
      // the tool does not see). The library is asked without the lock (it may take its own).
      if (!library_vouches && !in_callback_for(kind, h)) {
        lock.unlock();
        if (!library_has_live(kind, h)) return false;
        lock.lock();
      }
      freed.erase(h);
      was_freed = true;
    }
  }
  std::uint8_t flags = kObjectNone;
  if (kind == ObjectKind::Type && phase() != Phase::BeforeInit) {
    int ni = 0, na = 0, nd = 0, combiner = 0;
    if (PMPI_Type_get_envelope(from_handle<MPI_Datatype>(h), &ni, &na, &nd, &combiner) == MPI_SUCCESS &&
        combiner == MPI_COMBINER_NAMED)
      flags = kObjectPredefined;  // MPI_INT & co: attributes are fine, freeing is not
  }
  const Status s = r.engine->create_object(kind, h, flags).status;
  if (s == Status::Ok) t_state.ctx.adopted = Adopted{h, kind, true, was_freed};
  if (s == Status::CapacityExhausted) object_limit();
  return s == Status::Ok || s == Status::ObjectExists;
}

void note_freed(ObjectKind kind, Handle h) {
  Runtime& r = state();
  std::lock_guard<std::mutex> lock(r.freed_mu);
  auto& set = r.freed[static_cast<int>(kind)];
  if (set.size() > 100000) set.clear();  // bounded: forget the oldest knowledge wholesale
  set.insert(h);
  forget_constructed(kind, h);
}

void note_created(ObjectKind kind, Handle h) {
  Runtime& r = state();
  std::lock_guard<std::mutex> lock(r.freed_mu);
  r.freed[static_cast<int>(kind)].erase(h);
  forget_constructed(kind, h);
}

bool live_object(ObjectKind kind, Handle h) noexcept {
  ObjectInfo info{};
  return state().engine->object_info(kind, h, &info);
}

void add_reference(ObjectKind kind, Handle h) {
  Runtime& r = state();
  std::lock_guard<std::mutex> lock(r.freed_mu);
  ++r.references[static_cast<int>(kind)][h];
  r.reference_count.fetch_add(1, std::memory_order_relaxed);
}

bool drop_reference(ObjectKind kind, Handle h) {
  Runtime& r = state();
  if (r.reference_count.load(std::memory_order_relaxed) == 0) return false;  // the usual case
  std::lock_guard<std::mutex> lock(r.freed_mu);
  auto& refs = r.references[static_cast<int>(kind)];
  auto it = refs.find(h);
  if (it == refs.end()) return false;
  if (--it->second == 0) refs.erase(it);
  r.reference_count.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void forget_references(ObjectKind kind, Handle h) {
  Runtime& r = state();
  if (r.reference_count.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> lock(r.freed_mu);
  auto& refs = r.references[static_cast<int>(kind)];
  auto it = refs.find(h);
  if (it == refs.end()) return;
  r.reference_count.fetch_sub(it->second, std::memory_order_relaxed);
  refs.erase(it);
}

}  // namespace attrcheck::rt
