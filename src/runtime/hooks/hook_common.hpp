// What the hooks share (checks.cpp, and the hooks of each op family: set_hook.cpp, get_hook.cpp,
// delete_hook.cpp, keyval_hooks.cpp, object_hooks.cpp, lifecycle_hooks.cpp). Not a public header.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "attrcheck/engine.hpp"
#include "runtime/callbacks/replay.hpp"
#include "runtime/fast/pending.hpp"
#include "runtime/fast/query_cache.hpp"
#include "runtime/fast_path.hpp"
#include "runtime/hooks.hpp"
#include "runtime/process/errors.hpp"
#include "runtime/process/findings.hpp"
#include "runtime/process/keyvals.hpp"
#include "runtime/process/library.hpp"
#include "runtime/process/portability.hpp"
#include "runtime/process/constructor_copies.hpp"
#include "runtime/process/objects.hpp"
#include "runtime/process/provenance.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/thread_state.hpp"
#include "runtime/set_path.hpp"

namespace attrcheck::rt {

#define ATTRCHECK_LIKELY(x) __builtin_expect(!!(x), 1)

// What enter() leaves in *rc for a lifecycle call from a thread the thread level does not allow:
// forward it to the library and do nothing else.
constexpr int kPassThrough = -0x7a77;

// Everything an intercepted call checks first. False: refuse with *rc.
[[gnu::noinline]] bool enter_slow(const Call& call, int* rc);

// MPI was started through a path the tool did not see (`use mpi_f08`'s MPI_Init, a PMPI_Init):
// if the library says it runs, the tool adopts that state as MPI_Init would have set it. False:
// MPI is not running (not yet, or finalized).
bool adopt_library_start() noexcept;
// The finding that says the run was not checked, once per process: tool.bypassed if a tool loaded
// before attrcheck kept the calls it checks from it (process/chain.hpp: bypassed), tool.other-mpi
// if the program runs on another MPI library (other_library).
void note_unchecked();
// Gives the report at exit what only the lifecycle hooks know (process/rank_report.hpp).
void install_exit_hook();

// The common case in one inline test: MPI running, a current call, and a thread that passed the
// thread-level check with no callback of ours running (t_state.ctx.cb_top). Anything else takes the full
// path (enter_slow).
inline bool enter(const Call& call, int* rc) {
  settle();  // whatever this call does sees every set made before it
  const Runtime& r = state();
  if (ATTRCHECK_LIKELY(static_cast<Phase>(r.phase.load(std::memory_order_acquire)) == Phase::Running &&
                       !t_state.ctx.cb_top && !call.api->replacement))
    return true;
  return enter_slow(call, rc);
}

// Runs an engine operation on an object, registering the object first if the tool never saw it
// created (predefined datatypes, objects MPI made internally) and it was not freed through us.
// A Fortran call's handle came through f2c. Where C handles are pointers (Open MPI), f2c looks the
// Fortran integer up in the library's own handle table, which maps only live objects: the tool's
// record of a freed handle value does not outweigh it (an object the library made on a path the
// tool does not see may have reused the value). Where C handles are the Fortran integers
// themselves (MPICH), f2c is a cast that vouches for nothing: a Fortran call is checked as a C
// call is (every Fortran call that makes a handle is intercepted, as the C ones are).
inline bool library_vouches(const Call& call) noexcept {
  return !std::is_integral_v<MPI_Comm> && call.api->binding != Binding::C;
}

template <typename Op>
Result with_object(const Call& call, ObjectKind kind, Handle h, Op op) {
  Result res = op();
  if (res.status == Status::ObjectUnknown && adopt(kind, h, library_vouches(call))) res = op();
  return res;
}

inline Handle null_handle(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::Comm: return handle(MPI_COMM_NULL);
    case ObjectKind::Type: return handle(MPI_DATATYPE_NULL);
    case ObjectKind::Win: return handle(MPI_WIN_NULL);
  }
  return 0;
}

// Whether `h` names a live object (registering one the tool never saw created): Ok,
// ObjectNull or ObjectUnknown. `info`, if given, receives the object's registration.
Result check_object(const Call& call, ObjectKind kind, Handle h, ObjectInfo* info = nullptr);

// Remembers a query found valid at `layout` while MPI runs (nothing remembered outlives the
// layout advance when MPI_Finalize begins); nullptr otherwise.
QueryCache::Entry* remember_query(ObjectKind kind, Binding as, Handle h, int key, int engine_key,
                                  std::uint64_t layout) noexcept;
// What a set or delete would be refused for, before it reaches the library (shadow mode):
// object and keyval checks, predefined keyvals being read-only. A query this thread already found
// valid skips them. *engine_key: the engine's keyval; *present (if given): the attribute is set.
// A valid set also leaves the engine's cursor for it in the query's cache entry (checked_set).
Result check_modify(const Call& call, Handle h, int key, int* engine_key, int* present, bool set = false);

// What the library ran during a plain set or delete: nothing, or one delete callback (*seen, and
// the call in *ran). False if it ran anything else.
inline bool single_delete_seen(const Replay& replay, RanDelete* ran, bool* seen) {
  const std::size_t n = replay.seen.size();
  *seen = n == 1;
  if (n > 1) return false;
  if (n == 1) {
    const Observation& o = *replay.seen.begin();
    if (o.copy) return false;
    *ran = RanDelete{o.object, o.engine_id, o.value_in, o.rc};
  }
  return true;
}

// After an emulated set or delete that succeeded through the query's cursor (version: the engine's
// right after it, read under its lock while the cursor's layout still held), the query's entry
// takes the new answer, as a get would read it, so that the next call of the query needs no engine
// read (a delete's presence check). A callback that ran (`ran_user_code`: the keyval has a user
// delete function) may have called MPI on this thread, which may have moved the entry or the
// layout: then only while the entry still holds the query (`object`, `query`) at the same layout. A
// default-INTEGER value (sign-extended) is left to the full path.
inline void emulated_answer(QueryCache::Entry& q, bool ran_user_code, Handle object, std::uint64_t query,
                            std::uint64_t version, std::uint64_t word, int flag) noexcept {
  if (ran_user_code && (q.object != object || q.query != query || q.layout() != layout_stamp())) return;
  if (q.binding() == Binding::FortranInt) return;
  QueryCache::remember_answer(q, version, word, flag);
}

// Shadow mode: the library refused a call on an object this very call adopted (the tool never saw
// it made). The tool knew nothing to diverge from: it forgets the object and returns what the
// library said (reporting object.invalid if the tool had seen the handle freed). True if so.
bool refused_unknown(const Call& call, ObjectKind kind, Handle h, int rc);
bool refused_unknown(const Call& call, ObjectKind kind, Handle h, int rc, ReplayScope& replay);

// A refused call: its finding, then --on-error; returns what the call returns.
int refuse(const Call& call, Result res, ObjectKind kind, Handle h, int user_key, int engine_key);
// callback.reentrant: a call on the object a callback is running for.
int reentrant(const Call& call, ObjectKind kind, Handle h);

// Where the model follows the library (follow_library.cpp). Shadow mode, after a free the library
// and the model both failed: attributes the library dropped all the same are dropped from the
// model (and reported).
void follow_failed_free(const Call& call, ObjectKind kind, Handle h);
// A C get the library answered with a pointer: whether the attribute was set from Fortran and the
// library's pointer points at its value (both sides return their own copy's address).
bool same_fortran_value(ObjectKind kind, Handle h, int engine_key, const void* value_out) noexcept;

}  // namespace attrcheck::rt
