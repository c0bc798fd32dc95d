/* Prints, for the CPython whose headers it is compiled against, the offsets attrcheck reads a
 * thread's frames by while the thread has released the GIL (src/runtime/python/python_profile.hpp,
 * RawFrames): scripts/python-offsets.sh compiles and runs it. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_frame.h"
#if PY_VERSION_HEX >= 0x030E0000
#include "internal/pycore_interpframe_structs.h"
#endif

int main(void) {
  printf("{%d, %d, ", PY_MAJOR_VERSION, PY_MINOR_VERSION);
#if PY_VERSION_HEX < 0x030D0000
  printf("%zu, %zu, ", offsetof(PyThreadState, cframe), offsetof(_PyCFrame, current_frame));
#else
  printf("%zu, RawFrames::kNone, ", offsetof(PyThreadState, current_frame));
#endif
#if PY_VERSION_HEX < 0x030D0000
  printf("%zu, %zu, %zu, ", offsetof(_PyInterpreterFrame, f_code), offsetof(_PyInterpreterFrame, previous),
         offsetof(_PyInterpreterFrame, prev_instr));
#else
  printf("%zu, %zu, %zu, ", offsetof(_PyInterpreterFrame, f_executable), offsetof(_PyInterpreterFrame, previous),
         offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  printf("%zu, %zu, %zu, ", offsetof(PyCodeObject, co_filename), offsetof(PyCodeObject, co_qualname),
         offsetof(PyCodeObject, co_code_adaptive));
  printf("%zu, %zu, %zu, %zu, ", offsetof(PyObject, ob_type), sizeof(PyASCIIObject), offsetof(PyASCIIObject, length),
         offsetof(PyASCIIObject, state));
  /* The owner byte, and the first owner value of a frame that is no Python function's (the C
   * stack's entry frames, 3.12 on; 3.14: the interpreter's own frames too). */
#if PY_VERSION_HEX < 0x030C0000
  printf("%zu, 256}\n", offsetof(_PyInterpreterFrame, owner));
#elif PY_VERSION_HEX < 0x030E0000
  printf("%zu, %d}\n", offsetof(_PyInterpreterFrame, owner), FRAME_OWNED_BY_CSTACK);
#else
  printf("%zu, %d}\n", offsetof(_PyInterpreterFrame, owner), FRAME_OWNED_BY_INTERPRETER);
#endif
  return 0;
}
