// What the generated wrappers hand the runtime: the static description of an intercepted
// function (Api), the call in progress (Call), and handles as the engine holds them. Not a public
// header.
#pragma once

#include <cstdint>
#include <type_traits>

#include "attrcheck/engine.hpp"

namespace attrcheck::rt {

// The static description of an intercepted function (one per wrapper).
struct Api {
  const char* name;
  ObjectKind kind;
  const char* replacement;  // deprecated functions: what to use instead; else nullptr
  Binding binding = Binding::C;  // how attribute values and callbacks are passed (C or Fortran)
  // Creates, duplicates or frees an object (collective for communicators and windows): from a
  // thread the thread level does not allow, it is passed to the library unmirrored rather than
  // refused, so that other ranks are not left waiting in it.
  bool lifecycle = false;
};

// One intercepted call in progress.
struct Call {
  const Api* api;
  const void* caller;  // return address into the application
  // The wrapper's own frame (its frame pointer), where a stack walk of the application's frames
  // can start; set by the keyval create and free wrappers (gen_wrappers.py STACK_OPS), else null.
  const void* frame = nullptr;
};

template <typename T>
inline Handle handle(T h) noexcept {
  if constexpr (std::is_pointer_v<T>) {
    return static_cast<Handle>(reinterpret_cast<std::uintptr_t>(h));
  } else {
    // An integer handle (MPICH's) as its bits: MPICH's handles have the top bit set, and a
    // sign-extended one would read 0xffffffff84000002 in reports.
    return static_cast<Handle>(static_cast<std::make_unsigned_t<T>>(h));
  }
}

template <typename T>
inline T from_handle(Handle h) noexcept {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<T>(static_cast<std::uintptr_t>(h));
  } else {
    return static_cast<T>(h);
  }
}

}  // namespace attrcheck::rt
