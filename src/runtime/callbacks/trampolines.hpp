// The trampolines the library holds for user keyvals in shadow mode (trampolines.cpp). Not a
// public header.
#pragma once

#include "attrcheck/engine.hpp"

namespace attrcheck::rt {

// The library's copy and delete callbacks for a keyval whose user functions are in binding `lang`.
void* trampoline_copy(ObjectKind kind, Binding lang = Binding::C) noexcept;
void* trampoline_delete(ObjectKind kind, Binding lang = Binding::C) noexcept;

}  // namespace attrcheck::rt
