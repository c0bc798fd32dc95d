// What the generated wrappers (gen/gen_wrappers.py) call: one hook per op. Each hook runs the
// checks, mirrors or serves the call with the engine according to the mode, and forwards to
// PMPI through the lambdas the wrapper passes; the hooks are in hooks/, one file per op family.
// This header, fast_path.hpp, set_path.hpp and call_counts.hpp are the runtime's face to the
// generated wrappers, which include them by these paths: they stay at the top of src/runtime.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "attrcheck/engine.hpp"
#include "runtime/process/call.hpp"
#include "runtime/process/library.hpp"
#include "runtime/process/state.hpp"

// The wrappers are the library's only exported symbols.
#define ATTRCHECK_EXPORT __attribute__((visibility("default")))

namespace attrcheck::rt {

// A non-owning reference to a callable (the wrappers' PMPI-forwarding lambdas): no allocation.
template <typename Sig>
class FnRef;
template <typename R, typename... A>
class FnRef<R(A...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FnRef>>>
  FnRef(F&& f) noexcept  // NOLINT: implicit on purpose
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, A... a) -> R { return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...); }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

enum class Op { CreateKeyval, FreeKeyval, SetAttr, GetAttr, DeleteAttr, Dup, Construct, Obtain, Free, Init, Finalize, Abort };

// False when the call should go straight to PMPI (mode=off: g_off, process/state.hpp).
inline bool active(Op) noexcept { return !g_off; }

int on_null_arg(const Call& call, const char* param, const FnRef<int()>& forward);
// extra_state: the pointer (C) or the integer (Fortran); forward gets the same representation.
int on_create_keyval(const Call& call, void* copy_fn, void* delete_fn, int* keyval, std::uint64_t extra_state,
                     const FnRef<int(void* copy_fn, void* delete_fn, std::uint64_t extra_state)>& forward);
int on_free_keyval(const Call& call, int* keyval, const FnRef<int()>& forward);
// value: the word as set in the call's binding (an address from C, the integer from Fortran).
int on_set_attr(const Call& call, Handle object, int keyval, std::uint64_t value, const FnRef<int()>& forward);
// value_out: a void* (C), an MPI_Aint (Fortran) or an MPI_Fint (MPI_ATTR_GET from Fortran).
int on_get_attr(const Call& call, Handle object, int keyval, void* value_out, int* flag, const FnRef<int()>& forward);
int on_delete_attr(const Call& call, Handle object, int keyval, const FnRef<int()>& forward);
int on_dup(const Call& call, Handle object, const FnRef<int(Handle*)>& forward, const FnRef<void()>& undo);
// `parent`: the object a constructor makes the new one from whose attributes some libraries copy
// (the spec's role parent), or 0.
int on_construct(const Call& call, Handle parent, const FnRef<int(Handle*)>& forward);
// The base address a window constructor returned (MPI_Win_allocate's baseptr), for the answer
// to MPI_WIN_BASE on that window (hooks/window_base.cpp).
void note_window_base(Handle win, const void* base) noexcept;
// A call that returns handles to objects the user may free, which are not (only) new objects:
//   Alias: a live object's handle again, one more free owed (MPI_Type_get_contents);
//   Same:  the same object's handle every time (MPI_Comm_get_parent);
//   New:   new objects (MPI_File_get_view).
// Whatever the tool knew of a returned handle, it is live from now on.
enum class Returns { Alias, Same, New };
int on_obtain(const Call& call, Returns how, const FnRef<int(std::vector<Handle>*)>& forward);
// How many datatypes MPI_Type_get_contents wrote (its envelope's count, at most `max`).
int contents_datatypes(MPI_Datatype type, int max) noexcept;
int on_free(const Call& call, Handle object, const FnRef<int()>& forward);
int on_init(const Call& call, int required, const FnRef<int(int* provided)>& forward);
int on_finalize(const Call& call, const FnRef<int()>& forward);
int on_abort(const Call& call, Handle comm, int errorcode, const FnRef<int()>& forward);

}  // namespace attrcheck::rt
