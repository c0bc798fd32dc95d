// What a constructor that some libraries make copy attributes did copy, or would have (the
// CopiesAttributes divergences of mpi_profile.def: MPI_Comm_create_group and
// MPI_Dist_graph_create_adjacent on Open MPI 4.1 and 5.0): per object it made, the parent's
// attributes whose keyval has a copy callback. A get of one of them on the new object depends on
// the constructor's copying, and draws the portability finding of that divergence.
#pragma once

#include <atomic>
#include <cstdint>

#include "attrcheck/engine.hpp"
#include "runtime/process/call.hpp"

namespace attrcheck::rt {

// After constructor `call` made `fresh` from `parent` (0: a constructor with no parent role).
void note_constructed(const Call& call, ObjectKind kind, Handle parent, Handle fresh);
// The object `h` was freed or its handle made anew: what its constructor copied no longer holds.
void forget_constructed(ObjectKind kind, Handle h);
// The program set or deleted `engine_key` on `h`: a get of it no longer depends on the constructor.
void forget_constructed_key(ObjectKind kind, Handle h, int engine_key);
// A get of `engine_key` on `h` that found the attribute or not: reports the dependence if the
// constructor of `h` copied it, or would have on another series. Whether it did (then the get is
// not cached, so that each site that makes it is seen).
bool note_constructed_get(const Call& call, ObjectKind kind, Handle h, int engine_key, int user_key, bool found);

// Whether any object's constructor copies are recorded (the get path's one test).
extern std::atomic<bool> g_constructed_copies;

}  // namespace attrcheck::rt
