// The trampolines: the callbacks the library holds for user keyvals in shadow mode
// (keyval_hooks.cpp gives it these in the user's functions' place). Each runs the user's function
// as the engine's invoker would (run.hpp) and records the run for the replay of the call in
// progress.
#include <cstring>
#include <type_traits>

#include "runtime/process/call_counts.hpp"
#include "runtime/callbacks/replay.hpp"
#include "runtime/callbacks/run.hpp"
#include "runtime/callbacks/trampolines.hpp"
#include "runtime/process/fast_state.hpp"
#include "runtime/profile/mpi_profile.hpp"
#include "runtime/process/keyvals.hpp"
#include "runtime/process/library.hpp"
#include "runtime/process/frees_under_way.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

namespace {

// ---- trampolines: what the library calls in shadow mode ----------------------------------------

// A C copy callback of a Fortran-set attribute is handed a pointer to the stored integer (MPICH:
// to a copy on its stack, gone by the time the run is replayed; the model: to its own cell). If
// `in` points at the value the model holds, the run is recorded with the model's pointer, so the
// replay compares like with like; else as passed.
// (The rest of as_model_pointer, out of line: its frame would be set up on every copy callback.)
__attribute__((noinline)) std::uint64_t model_pointer_of_fortran(ObjectKind kind, Handle old, int engine_id,
                                                                 const void* in) noexcept {
  const std::uint64_t passed = reinterpret_cast<std::uintptr_t>(in);
  Engine& e = *state().engine;
  std::uint64_t c_word = 0, f_word = 0;
  int found = 0;
  if (!e.get_attr(kind, old, engine_id, Binding::C, &c_word, &found).ok() || !found || c_word == passed) return passed;
  if (!e.get_attr(kind, old, engine_id, Binding::FortranAint, &f_word, &found).ok() || !found || f_word == c_word)
    return passed;  // set from C: the model's C read is the value itself
  const auto v = static_cast<std::int64_t>(f_word);
  bool same;
  if (v >= INT32_MIN && v <= INT32_MAX) {  // (an MPI_ATTR_PUT value: only 4 bytes may be there)
    std::int32_t low;
    std::memcpy(&low, in, sizeof low);
    same = low == static_cast<std::int32_t>(v);
  } else {
    std::int64_t whole;
    std::memcpy(&whole, in, sizeof whole);
    same = whole == v;
  }
  return same ? c_word : passed;
}

inline std::uint64_t as_model_pointer(ObjectKind kind, Handle old, int engine_id, const void* in) noexcept {
  // Nothing was ever set from Fortran: the model's C read is the value as passed (saves two
  // get_attr on every copy callback). (The engine's flag read where it is, not through state()
  // and a call.)
  if (!in || !g_fast.fortran_values->load(std::memory_order_acquire)) return reinterpret_cast<std::uintptr_t>(in);
  return model_pointer_of_fortran(kind, old, engine_id, in);
}

template <ObjectKind K, typename Obj>
int trampoline_copy_fn(Obj old, int key, void* extra, void* in, void* out, int* flag) {
  // (On every attribute of a dup: the C call is made here directly, as run_copy would make it,
  // without call_copy's dispatch on the binding and kind.)
  using Fn = int (*)(Obj, int, void*, void*, void*, int*);
  count_call(Family::Callback, Lang::C);
  auto* rec = static_cast<KeyRecord*>(extra);
  const Handle h = handle(old);
  const int engine_id = rec->engine_id.load(std::memory_order_relaxed);
  std::uint64_t value_out = 0;
  CbFrame frame{rec->copy_fn, h, t_state.ctx.call, t_state.ctx.cb_top, key, K, true, false};
  bool threw = false;
  const int rc = run_guarded(frame, engine_id, &threw, [&] {
    return reinterpret_cast<Fn>(rec->copy_fn)(old, key, reinterpret_cast<void*>(static_cast<std::uintptr_t>(rec->extra_state)),
                                              in, &value_out, flag);
  });
  // (*flag read once: after the stores below the compiler read it again, as it may alias them.)
  const int f = *flag;
  const bool odd = static_cast<unsigned>(f) > 1;
  if (__builtin_expect(rc == MPI_SUCCESS && !odd, 1)) {
    if (f) std::memcpy(out, &value_out, sizeof(void*));
  } else {
    if (!threw) report_copy_result(rc, f, key, rec->copy_fn, engine_id);
    if (rc == MPI_SUCCESS) std::memcpy(out, &value_out, sizeof(void*));  // (an odd flag: not 0)
  }
  if (Replay* r = t_state.ctx.replay) {
    const std::uint64_t value_in = as_model_pointer(K, h, engine_id, in);
    RunLog* const log = r->log;
    if (__builtin_expect(log && log->copies_of == h && log->kind == K, 1)) {
      log->copies.append() = RanCopy{engine_id, rc, f, value_in, value_out};
      if (__builtin_expect(odd, 0)) log->odd_flag = true;
    } else {
      r->seen.emplace_back() = Observation{true, K, h, engine_id, rc, value_in, f, value_out, false, 0};
    }
  } else if (rc == MPI_SUCCESS && f)  // a copy the library made inside a call attrcheck does not hook
    rec->unseen_copy.store(true, std::memory_order_relaxed);
  return rc;
}

// Whether this run (object h, keyval engine_id, value, rc) is the one the quick way that installed
// the quiet replay `r` expects (thread_state.hpp: ExpectedRun): then it is marked run, and not
// logged.
[[gnu::always_inline]] inline bool expected_run(const Replay* r, Handle h, int engine_id, std::uint64_t value,
                                                int rc) noexcept {
  ExpectedRun& e = t_state.ctx.expected;
  if (r != t_state.ctx.quiet || e.state != kExpectArmed || rc != MPI_SUCCESS || e.object != h || e.value != value ||
      e.engine_id != engine_id)
    return false;
  e.state = kExpectRan;
  return true;
}

template <ObjectKind K, typename Obj>
int trampoline_delete_fn(Obj object, int key, void* value, void* extra) {
  // (On every replacing set and delete: the C call is made here directly, not through call_delete.)
  using Fn = int (*)(Obj, int, void*, void*);
  count_call(Family::Callback, Lang::C);
  auto* rec = static_cast<KeyRecord*>(extra);
  const Handle h = handle(object);
  const int engine_id = rec->engine_id.load(std::memory_order_relaxed);
  // (teardown set apart, on the branch where it may be true: as an initialiser, gcc stored the
  // frame's flags and then teardown's false again.)
  CbFrame frame{rec->delete_fn, h, t_state.ctx.call, t_state.ctx.cb_top, key, K, false, false};
  if (__builtin_expect(!g_fast.open.load(std::memory_order_relaxed), 0)) frame.teardown = teardown_delete(K, h);
  const int rc = run_delete_as(frame, engine_id, [&] {
    return reinterpret_cast<Fn>(rec->delete_fn)(object, key, value,
                                                reinterpret_cast<void*>(static_cast<std::uintptr_t>(rec->extra_state)));
  });
  if (Replay* r = t_state.ctx.replay) {
    const std::uint64_t value_in = reinterpret_cast<std::uintptr_t>(value);
    if (expected_run(r, h, engine_id, value_in, rc)) return rc;
    RunLog* const log = r->log;
    if (__builtin_expect(log && log->deletes_of == h && log->kind == K, 1)) {
      log->deletes.append() = RanDelete{h, engine_id, value_in, rc};
    } else {
      // During the free of another object: the library is destroying this one too (a free it
      // deferred), and releases its handle before the free returns.
      if (log && log->deletes_of != RunLog::kNone) hold_deferred_free(h);
      // (What a delete's replay reads, field by field: flag, value_out and fortran_object are a
      // copy callback's and a Fortran one's. Three stores fewer on every replacing set.)
      Observation& o = r->seen.emplace_back();
      o.copy = false;
      o.kind = K;
      o.object = h;
      o.engine_id = engine_id;
      o.value_in = value_in;
      o.rc = rc;
      o.used = false;
    }
  }
  return rc;
}

// The library calls a Fortran keyval's callbacks with the user's extra_state (MPICH keeps the
// address of the user's variable and passes that on), so the Fortran trampolines find the record
// by the keyval the library passes them instead. It is mapped from the keyval's creation until
// the library has destroyed it (the quarantine holds frees back; keyvals.cpp).
KeyRecord* fortran_record(Fint key) noexcept { return record_for(to_engine_key_shadow(c_keyval(key))); }

template <typename V>
constexpr Binding kFortranBinding = std::is_same_v<V, MPI_Aint> ? Binding::FortranAint : Binding::FortranInt;
template <typename V>
inline std::uint64_t fortran_word(V v) noexcept { return static_cast<std::uint64_t>(static_cast<std::int64_t>(v)); }

// V: MPI_Aint (MPI-2 callbacks) or MPI_Fint (MPI_KEYVAL_CREATE's). The user's callback runs as the
// engine runs it in emulate mode (run_copy / run_delete), with the values the library passed.
template <ObjectKind K, typename V>
void fortran_trampoline_copy_fn(Fint* old, Fint* key, V* extra, V* in, V* out, Fint* flag, Fint* ierr) {
  count_call(Family::Callback, Lang::Fortran);
  KeyRecord* rec = fortran_record(*key);
  if (!rec || !rec->copy_fn) {  // cannot happen while the library holds the keyval: not copied
    *flag = 0;
    *ierr = MPI_ERR_INTERN;
    return;
  }
  const int engine_id = rec->engine_id.load(std::memory_order_relaxed);
  const Handle h = c_handle(K, *old);
  const std::uint64_t value_in = fortran_word(*in);
  std::uint64_t value_out = 0;
  int logical = 0;
  const int rc = run_copy(K, kFortranBinding<V>, rec->copy_fn, h, *key, fortran_word(*extra), value_in, &value_out,
                          &logical, engine_id);
  *out = static_cast<V>(value_out);
  *flag = logical;
  *ierr = rc;
  if (Replay* r = t_state.ctx.replay) r->seen.push_back(Observation{true, K, h, engine_id, rc, value_in, logical, value_out, false, 0});
  else if (rc == MPI_SUCCESS && logical) rec->unseen_copy.store(true, std::memory_order_relaxed);  // (as in C)
}

// Where the library is known to pass Fortran delete callbacks a wrong handle (the profile's
// WrongHandle divergence), the handle says nothing about the object: the callback's frame then
// names no object (no callback.reentrant on an object it merely seems to be for) and is not
// taken for MPI_Finalize's teardown (no callback.after-finalize on that ground).
template <ObjectKind K, typename V>
void fortran_trampoline_delete_fn(Fint* object, Fint* key, V* value, V* extra, Fint* ierr) {
  using Fn = void (*)(Fint*, Fint*, V*, V*, Fint*);
  const bool trusted = fortran_delete_handles_trusted();
  count_call(Family::Callback, Lang::Fortran);
  KeyRecord* rec = fortran_record(*key);
  if (!rec || !rec->delete_fn) {
    *ierr = MPI_ERR_INTERN;
    return;
  }
  const int engine_id = rec->engine_id.load(std::memory_order_relaxed);
  const Handle h = c_handle(K, *object);
  CbFrame frame{rec->delete_fn, trusted ? h : ~Handle{0}, t_state.ctx.call, t_state.ctx.cb_top, *key, K, false,
                trusted && teardown_delete(K, h)};
  const int rc = run_delete_as(frame, engine_id, [&] {
    reinterpret_cast<Fn>(rec->delete_fn)(object, key, value, extra, ierr);
    return static_cast<int>(*ierr);
  });
  *ierr = rc;
  if (Replay* r = t_state.ctx.replay) {
    if (expected_run(r, h, engine_id, fortran_word(*value), rc)) return;
    r->seen.emplace_back() = Observation{false, K, h, engine_id, rc, fortran_word(*value), 0, 0, false, *object};
  }
}

template <typename V>
void* fortran_trampoline_copy(ObjectKind kind) noexcept {
  switch (kind) {
    case ObjectKind::Comm: return reinterpret_cast<void*>(&fortran_trampoline_copy_fn<ObjectKind::Comm, V>);
    case ObjectKind::Type: return reinterpret_cast<void*>(&fortran_trampoline_copy_fn<ObjectKind::Type, V>);
    case ObjectKind::Win: return reinterpret_cast<void*>(&fortran_trampoline_copy_fn<ObjectKind::Win, V>);
  }
  return nullptr;
}

template <typename V>
void* fortran_trampoline_delete(ObjectKind kind) noexcept {
  switch (kind) {
    case ObjectKind::Comm: return reinterpret_cast<void*>(&fortran_trampoline_delete_fn<ObjectKind::Comm, V>);
    case ObjectKind::Type: return reinterpret_cast<void*>(&fortran_trampoline_delete_fn<ObjectKind::Type, V>);
    case ObjectKind::Win: return reinterpret_cast<void*>(&fortran_trampoline_delete_fn<ObjectKind::Win, V>);
  }
  return nullptr;
}

}  // namespace

void* trampoline_copy(ObjectKind kind, Binding lang) noexcept {
  if (lang != Binding::C)
    return lang == Binding::FortranAint ? fortran_trampoline_copy<MPI_Aint>(kind) : fortran_trampoline_copy<Fint>(kind);
  switch (kind) {
    case ObjectKind::Comm: return reinterpret_cast<void*>(&trampoline_copy_fn<ObjectKind::Comm, MPI_Comm>);
    case ObjectKind::Type: return reinterpret_cast<void*>(&trampoline_copy_fn<ObjectKind::Type, MPI_Datatype>);
    case ObjectKind::Win: return reinterpret_cast<void*>(&trampoline_copy_fn<ObjectKind::Win, MPI_Win>);
  }
  return nullptr;
}

void* trampoline_delete(ObjectKind kind, Binding lang) noexcept {
  if (lang != Binding::C)
    return lang == Binding::FortranAint ? fortran_trampoline_delete<MPI_Aint>(kind) : fortran_trampoline_delete<Fint>(kind);
  switch (kind) {
    case ObjectKind::Comm: return reinterpret_cast<void*>(&trampoline_delete_fn<ObjectKind::Comm, MPI_Comm>);
    case ObjectKind::Type: return reinterpret_cast<void*>(&trampoline_delete_fn<ObjectKind::Type, MPI_Datatype>);
    case ObjectKind::Win: return reinterpret_cast<void*>(&trampoline_delete_fn<ObjectKind::Win, MPI_Win>);
  }
  return nullptr;
}

}  // namespace attrcheck::rt
