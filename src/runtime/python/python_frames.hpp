// The calling thread's Python frames, for the stacks attrcheck records (report/python_frames.hpp
// says how they travel in a stack). The interpreter's C API is found at run time with
// dlsym(RTLD_DEFAULT), never linked: a program without Python pays one pointer test (active()).
// Not a public header.
#pragma once

#include <cstddef>

namespace attrcheck::rt::python {

struct Interpreter;
// The Python this process runs, once found at MPI_Init (init); null in a program without one, with
// a version python_profile.hpp does not list, or with ATTRCHECK_PYTHON_FRAMES=0.
[[gnu::visibility("hidden")]] extern const Interpreter* g_interpreter;
inline bool active() noexcept { return g_interpreter != nullptr; }

// Looks for the interpreter's C API in the process (at MPI_Init: an mpi4py program has imported
// its MPI module, so the interpreter is there). Once; later calls do nothing.
void init() noexcept;
// The Python version found ("3.11"), or "" when none is read.
const char* version() noexcept;
// The version of a Python the process runs whose frames are not read (one python_profile.hpp
// does not list, or whose C API lacks a function the walk needs), or "": a note for the report.
// ATTRCHECK_PYTHON_FRAMES=0 asks for none, and gets no note.
const char* unread_version() noexcept;
// The versions read, "3.11, 3.12, ...".
const char* read_versions() noexcept;
// Whether a call made without the GIL got no Python frames because they are not read that way
// for this Python (python_profile.hpp, RawFrames), and why (into `why`): a note for the report.
bool released_unread(char* why, std::size_t size) noexcept;

// This thread's Python frames, innermost first, as tagged words (python_frame_word), at most
// `max`. Holding the GIL, through the C API; having released it (a call mpi4py makes `with
// nogil`), through the interpreter's structs (python_profile.hpp, RawFrames), once a walk holding
// it read the same frames that way. 0 for a thread Python never ran on, or when no Python is
// read. Leaves the thread's Python exception state as it found it. Normal path only (takes the
// GIL holder's locks: never from a signal handler).
int capture(void** out, int max) noexcept;

// A keyval callback that mpi4py (3.1 on) runs: its C function `fn` is in mpi4py's MPI module and
// its extra_state is mpi4py's keyval state (a _p_keyval, holding the Python callables). Takes the
// GIL as mpi4py's own callback took it at this point a moment before (PyGILState_Ensure: no wait
// that callback did not have), reads the Python function it called (copy_fn or delete_fn: as a
// tagged frame word in *function, at its code's co_filename, co_firstlineno and co_qualname, when
// it is a function or a method) and this thread's Python frames (the call that ran the callback,
// which mpi4py makes with the GIL released for Comm.Dup and Comm.Free), and gives the GIL back.
// The thread's exception state is left as it was. False, with nothing read, for any other
// callback. Normal path only; after the callback returned, never inside it.
bool mpi4py_callback(const void* fn, const void* extra_state, bool copy, void** function, void** frames, int max,
                     int* depth) noexcept;

}  // namespace attrcheck::rt::python
