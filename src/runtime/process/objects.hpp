// What the runtime knows about object handles beyond the engine's registrations (objects.cpp):
// handles freed through it, handles it never saw made (adopted on first use), handles the library
// handed out again, and the engine's capacity. Not a public header.
#pragma once

#include <atomic>

#include "attrcheck/engine.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// Registers an unknown, non-null handle the tool never saw created
// (predefined datatypes, objects MPI made internally). False if the handle was freed through the
// tool and no call returned it since, unless `library_vouches` (the handle came through the
// library's Fortran handle table), a callback is running for it, or library_has_live says so.
bool adopt(ObjectKind kind, Handle h, bool library_vouches = false);
// The object adopt() last registered on this thread: t_state.ctx.adopted (thread_state.hpp).
inline bool adopted_now(ObjectKind kind, Handle h) noexcept {
  return t_state.ctx.adopted.set && t_state.ctx.adopted.h == h && t_state.ctx.adopted.kind == kind;
}
// Past the engine's capacity (objects.cpp): reports tool.limit once per `what`, and from then on
// unchecked() says which calls go to the library unchecked (a key created past the keyval limit,
// an object the engine could not register).
void note_limit(const char* what, const char* detail);
void add_unchecked_key(int key);
void object_limit();  // the engine could not register an object
bool unchecked_slow(ObjectKind kind, const Handle* h, const int* key);
inline bool unchecked(ObjectKind kind, const Handle* h, const int* key) {  // either may be null
  return __builtin_expect(state().limited.load(std::memory_order_relaxed), 0) && unchecked_slow(kind, h, key);
}
void note_freed(ObjectKind kind, Handle h);
void note_created(ObjectKind kind, Handle h);
bool live_object(ObjectKind kind, Handle h) noexcept;
// A live object's handle returned again by the library (one more free owed), and its free.
// drop_reference: true when the free only dropped such a reference (the object lives on).
void add_reference(ObjectKind kind, Handle h);
bool drop_reference(ObjectKind kind, Handle h);
void forget_references(ObjectKind kind, Handle h);

}  // namespace attrcheck::rt
