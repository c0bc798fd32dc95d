// MPI_THREAD_MULTIPLE, shadow mode: the frees under way (frees_under_way.cpp), from before the
// library frees the handle until the engine has mirrored it (on_free mirrors after the library
// returns, to replay the callbacks it ran). A library that hands a freed handle out again at once
// (MPICH) may give it to another thread's dup or constructor in that window: the new object's
// registration waits for the free's mirror (which runs only the tool's code: the wait is short),
// so that the free does not drop the new object and the new object does not drop the old one
// under the free (impl.divergence object-unknown at MPI_Comm_free, or a later call on the new
// handle refused). Not a public header.
#pragma once

#include <mpi.h>

#include "attrcheck/engine.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

struct FreeUnderWay;  // a slot: the handle being freed, and the thread freeing it

// Opens a window on `h` for this thread: frees_open raised first, then a free slot claimed.
// nullptr: all slots taken (the free goes unguarded; frees_open is lowered again).
FreeUnderWay* open_window(Handle h) noexcept;
void close_window(FreeUnderWay* f) noexcept;

// A free's window on its handle, open while the free and its mirror run (at MPI_THREAD_MULTIPLE).
class FreeWindow {
 public:
  explicit FreeWindow(Handle h) noexcept {
    if (state().thread_level >= MPI_THREAD_MULTIPLE && h != 0) slot_ = open_window(h);
  }
  ~FreeWindow() {
    if (slot_) close_window(slot_);
  }
  FreeWindow(const FreeWindow&) = delete;
  FreeWindow& operator=(const FreeWindow&) = delete;

 private:
  FreeUnderWay* slot_ = nullptr;
};

// Frees the library makes of other objects inside this thread's free: a datatype freed while
// another was built from it is destroyed, its delete callbacks run and its handle released, only
// when the last one built from it is freed (type-free-defers-delete-callbacks), so inside that
// free's call. The delete trampoline sees those callbacks before the library releases the handle,
// and holds the handle as a FreeWindow holds the freed object's (hold_deferred_free), until the
// free's mirror has accounted for them: else another thread's constructor could register the
// handle anew first, and the mirror would take the deferred callbacks for callbacks run on that
// new object ("ran a delete callback ... that the standard does not call here").
constexpr int kDeferredHeld = 8;
extern __thread FreeUnderWay* t_deferred_frees[kDeferredHeld];
extern __thread int t_deferred_free_count;

// The handles held during one free (a free made inside a callback of another holds its own, and
// lets go of those only).
class DeferredFrees {
 public:
  DeferredFrees() noexcept : first_(t_deferred_free_count) {}
  ~DeferredFrees() {
    for (int i = first_; i < t_deferred_free_count; ++i) close_window(t_deferred_frees[i]);
    t_deferred_free_count = first_;
  }
  DeferredFrees(const DeferredFrees&) = delete;
  DeferredFrees& operator=(const DeferredFrees&) = delete;

 private:
  int first_;
};

// Waits while another thread's free of `h` is under way (FreeWindow).
void wait_for_free_of(Handle h) noexcept;

// MPI_THREAD_MULTIPLE, shadow: the library runs `h`'s delete callbacks inside this thread's free
// of another object, so releases `h` too (a delete trampoline sees it): another thread's
// registration of `h` waits until the free's mirror is done.
void hold_deferred_free(Handle h) noexcept;

}  // namespace attrcheck::rt
