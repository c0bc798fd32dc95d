// The unwind tests' reference: libgcc's DWARF unwinder, called directly (glibc's backtrace() is
// the same unwinder, but a sanitizer runtime intercepts it with a frame-pointer walk of its own).
#pragma once

#include <unwind.h>

namespace attrcheck_test {

struct ReferenceWalk {
  void** out;
  int max;
  int n;
};

inline _Unwind_Reason_Code reference_frame(_Unwind_Context* context, void* arg) {
  auto* w = static_cast<ReferenceWalk*>(arg);
  if (w->n >= w->max) return _URC_END_OF_STACK;
  // After the outermost frame (_start's, whose return address is undefined), libgcc reports one
  // more with IP 0: not a frame.
  if (_Unwind_GetIP(context) == 0) return _URC_END_OF_STACK;
  w->out[w->n++] = reinterpret_cast<void*>(_Unwind_GetIP(context));
  return _URC_NO_REASON;
}

// The calling function's stack, its own call site first (inlined: no frame of its own). Returns
// the number of addresses stored, at most `max`.
__attribute__((always_inline)) inline int reference_backtrace(void** out, int max) {
  ReferenceWalk walk{out, max, 0};
  _Unwind_Backtrace(&reference_frame, &walk);
  return walk.n;
}

}  // namespace attrcheck_test
