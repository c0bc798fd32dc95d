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
#include <string>

#include "runtime/hooks.hpp"
#include "runtime/process/runtime.hpp"

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

namespace {
// MPICH: whether the library takes `h` as a live communicator or window, asked with a query that
// changes nothing, under MPI_ERRORS_RETURN (an invalid handle is reported through
// MPI_COMM_WORLD's error handler, which is fatal by default: it is swapped for the query and
// put back, which only a program whose threads all call MPI could see).
bool library_validates(ObjectKind kind, Handle h) noexcept {
  MPI_Errhandler saved = MPI_ERRHANDLER_NULL;
  if (PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &saved) != MPI_SUCCESS) return false;
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = MPI_ERR_OTHER;
  if (kind == ObjectKind::Comm) {
    int flag = 0;
    rc = PMPI_Comm_test_inter(from_handle<MPI_Comm>(h), &flag);
  } else if (kind == ObjectKind::Win) {
    char name[MPI_MAX_OBJECT_NAME];
    int length = 0;
    rc = PMPI_Win_get_name(from_handle<MPI_Win>(h), name, &length);
  }
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, saved);
  PMPI_Errhandler_free(&saved);
  return rc == MPI_SUCCESS;
}
}  // namespace

bool library_has_live(ObjectKind kind, Handle h) noexcept {
  if (phase() != Phase::Running) return false;
  if constexpr (!std::is_integral_v<MPI_Comm>) {
    // Open MPI: C handles are the objects' addresses, and the library does not check that one
    // names a live object (it reads the freed memory: a second MPI_Comm_free of a handle returns
    // MPI_SUCCESS), so the handle is never handed to it. Its communicator and window tables (the
    // Fortran handles) map exactly the live objects (a freed object's slot is emptied), and f2c
    // reads only the table: the handle is live if some slot holds it. A new object takes the
    // lowest free slot, so the live ones lie below the last slot in use: the walk ends after
    // 4,096 empty slots in a row. A datatype enters its table only when MPI_Type_c2f is first
    // called on it (which reads the object): a datatype cannot be asked about.
    if (kind == ObjectKind::Type) return false;
    constexpr MPI_Fint kEmptyRun = 4096, kMax = 1 << 24;
    const Handle null = kind == ObjectKind::Comm ? handle(MPI_COMM_NULL) : handle(MPI_WIN_NULL);
    for (MPI_Fint f = 0, last = -1; f < kMax && f - last <= kEmptyRun; ++f) {
      const Handle got = c_handle(kind, f);
      if (got == h) return true;
      if (got != 0 && got != null) last = f;
    }
    return false;
  } else {
    // MPICH: handles are integers the library validates, but a freed datatype's is taken as valid
    // (MPI_Type_get_name and MPI_Type_size succeed, MPI_Type_get_envelope crashes): only
    // communicators and windows can be asked about, and only where no other thread may be
    // calling MPI while MPI_COMM_WORLD's error handler is swapped.
    if (kind == ObjectKind::Type || state().thread_level >= MPI_THREAD_MULTIPLE) return false;
    return library_validates(kind, h);
  }
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
}

void note_created(ObjectKind kind, Handle h) {
  Runtime& r = state();
  std::lock_guard<std::mutex> lock(r.freed_mu);
  r.freed[static_cast<int>(kind)].erase(h);
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

int contents_datatypes(MPI_Datatype type, int max) noexcept {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return 0;
  return nd < max ? nd : max;
}

}  // namespace attrcheck::rt
