// What differs between the Python versions whose frames attrcheck reads, in one table (as
// src/runtime/profile/ is for MPI libraries). Every entry was checked against that version's
// CPython sources and its exported symbols (nm -D /usr/bin/python3.X). A version not listed gets
// no Python frames: attrcheck does not guess how to tell whether a thread holds the GIL.
//
// Common to all listed versions (the C API since 3.9/3.11, exported by the interpreter):
//   PyThreadState_GetFrame, PyFrame_GetBack, PyFrame_GetCode (new references),
//   PyFrame_GetLasti (3.11), PyFrame_GetLineNumber, PyObject_GetAttrString (co_filename,
//   co_qualname: 3.11), PyUnicode_AsUTF8, PyErr_Occurred / PyErr_Clear / PyErr_Fetch /
//   PyErr_Restore (deprecated in 3.12, still exported in 3.13 and 3.14), PyGC_Disable /
//   PyGC_Enable (3.10), Py_IncRef / Py_DecRef, Py_IsInitialized, Py_Version (3.11).
// Not all of these are in the limited API: PyFrame_GetBack and PyFrame_GetLasti are in CPython's
// cpython/ headers, and so are both versions' thread-state getters below (3.11's is private); all
// are exported functions, called with the signatures both versions' headers give them, and no
// struct of the interpreter is read. That is why a version is read only once it is listed here.
// Frame objects: PyThreadState_GetFrame and PyFrame_GetBack make a frame object for an
// interpreter frame that has none yet (3.11 on). That allocation may collect garbage: 3.11 then
// collects at once (_PyObject_GC_Link), running finalizers that may call MPI inside the hook, so
// the walk runs with the collector disabled (and restored); 3.12 on only schedule a collection.
// A version not listed gets a note in the report (tool.python-frames) and no Python frames.
#pragma once

namespace attrcheck::rt::python {

// How a thread is known to hold the GIL (its frames are then its own to read).
enum class GilCheck {
  // 3.11: _PyThreadState_UncheckedGet() is the thread state of whoever holds the GIL (a
  // process-wide value, _PyRuntime.gilstate.tstate_current; null while nobody does); this thread
  // holds it iff that is this thread's own state, PyGILState_GetThisThreadState() (null for a
  // thread Python never saw, and once the interpreter is finalized). PyGILState_Check alone is
  // not enough: it answers 1 whenever its checks are off (a subinterpreter was made) or its TSS
  // key is gone (before initialization, after finalization).
  HolderIsThisThread,
  // 3.12 on: the thread state read is this thread's attached one (a thread-local, null while the
  // thread is detached, i.e. has released the GIL); attached means it holds the GIL (or,
  // free-threaded, may run Python): its frames are its own. 3.12 reads it with
  // _PyThreadState_UncheckedGet() (Python/pystate.c: current_fast_get(), the thread-local
  // _Py_tss_tstate that _swap_thread_states() clears when PyEval_SaveThread detaches); 3.13 and
  // 3.14 with PyThreadState_GetUnchecked() (the same thread-local; 3.14 keeps
  // _PyThreadState_UncheckedGet only as a static inline alias in cpython/pystate.h, so it is no
  // longer exported).
  AttachedState,
};

struct PythonVersion {
  int major, minor;
  GilCheck gil;
  const char* thread_state;  // the function giving the thread state GilCheck reads
};

inline constexpr PythonVersion kPythonVersions[] = {
    {3, 11, GilCheck::HolderIsThisThread, "_PyThreadState_UncheckedGet"},
    {3, 12, GilCheck::AttachedState, "_PyThreadState_UncheckedGet"},
    {3, 13, GilCheck::AttachedState, "PyThreadState_GetUnchecked"},
    {3, 14, GilCheck::AttachedState, "PyThreadState_GetUnchecked"},
};

// How a thread's frames are read while it has released the GIL (a call mpi4py makes `with
// nogil`: Comm.Dup, Comm.Free ...), as CPython's faulthandler reads them: from the thread's own
// thread state (PyGILState_GetThisThreadState), whose frames cannot change while the thread is in
// the MPI call, through the interpreter's structs. Each row is what scripts/python-offsets.sh
// prints for that version (offsetof in its own headers, the internal ones included; default
// build, x86-64). A version without a row, or whose row does not read the same frames as the C API
// on the process's first capture made holding the GIL, gets no frames for calls without it.
// 3.12's row is read off CPython 3.12's headers (Include/cpython/pystate.h, the internal
// pycore_frame.h and code.h) by hand, not printed: no root of the suite has them. The check
// against the C API in the process is what vouches for it there.
struct RawFrames {
  static constexpr unsigned long kNone = ~0ul;
  int major, minor;
  unsigned long tstate_frame;  // PyThreadState: current_frame (3.13 on), or cframe (3.11, 3.12)
  unsigned long cframe_frame;  // _PyCFrame: current_frame (kNone: read no cframe)
  unsigned long frame_code;    // _PyInterpreterFrame: f_code, f_executable (3.14: a tagged _PyStackRef)
  unsigned long frame_previous, frame_instr;  // previous; prev_instr (3.11, 3.12), instr_ptr (3.13 on)
  unsigned long code_filename, code_qualname, code_code;  // PyCodeObject: co_code_adaptive
  unsigned long ob_type;                                   // PyObject
  unsigned long ascii_size, ascii_length, ascii_state;    // PyASCIIObject (a compact ASCII str)
  unsigned long frame_owner;   // _PyInterpreterFrame: owner (a char)
  unsigned first_foreign_owner;  // owners from this value on run no Python function (256: none)
};

inline constexpr RawFrames kRawFrames[] = {
    {3, 11, 56, 8, 32, 48, 56, 112, 128, 184, 8, 48, 16, 32, 69, 256},
    {3, 12, 56, 0, 0, 8, 56, 112, 128, 192, 8, 40, 16, 32, 70, 3},
    {3, 13, 72, RawFrames::kNone, 0, 8, 56, 112, 128, 200, 8, 40, 16, 32, 70, 3},
    {3, 14, 72, RawFrames::kNone, 0, 8, 56, 112, 128, 208, 8, 40, 16, 32, 74, 3},
};

}  // namespace attrcheck::rt::python
