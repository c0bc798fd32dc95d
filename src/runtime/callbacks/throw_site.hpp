// Where a C++ exception that escapes a user callback was thrown.
//
// By the time run_guarded's catch sees an exception, the frames that threw it are gone (the
// unwinder has already run their cleanups). So attrcheck interposes the C++ ABI's __cxa_throw,
// which every `throw` expression calls before unwinding starts: while a user callback runs on
// this thread, the throwing stack is recorded (a per-thread buffer, the provenance unwinder),
// then the real __cxa_throw is called. Outside callbacks a throw costs one thread-local load.
// Not seen: throws from code that binds __cxa_throw locally (a statically linked libstdc++, or
// libstdc++'s own throws of std::out_of_range & co.), which then leave no throw site.
#pragma once

#include <cstddef>

#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// The depth of the last throw's recorded stack on this thread (0: none since the reset):
// t_state.ctx.throw_depth (thread_state.hpp), beside what a trampoline reads and writes of the
// thread's context anyway (a thread-local of its own cost a GOT load on every callback run).
// At a callback's start: forget any earlier throw on this thread. (Inline: it runs before every
// callback a trampoline or the emulated runner passes on.)
inline void throw_site_reset() noexcept { t_state.ctx.throw_depth = 0; }
// The stack of the last throw since throw_site_reset, innermost first (nullptr / 0 if none); valid
// until the next throw on this thread.
const void* const* throw_site_frames(int* depth) noexcept;
// "std::runtime_error (\"what\")" for the exception being handled; call only inside a catch.
void describe_current_exception(char* buf, std::size_t size) noexcept;

}  // namespace attrcheck::rt
