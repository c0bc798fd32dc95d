// Frames without frame pointers, for provenance_test: compiled with -O2 -fomit-frame-pointer
// (tests/CMakeLists.txt), and each level overwrites %rbp before calling the next, as code that
// uses rbp as an ordinary register does. A stack walk that follows rbp gets these frames wrong;
// one that reads the DWARF call frame information (what backtrace() does) gets them right.
#include <cstdint>

namespace provenance_nofp {

using Leaf = int (*)(void* arg);

__attribute__((noinline)) int descend(int levels, Leaf leaf, void* arg) {
  int r;
  if (levels == 0) {
    r = leaf(arg);
  } else {
#if defined(__x86_64__)
    // rbp holds a non-frame value across the call (the compiler saves and restores it around
    // this function, as the CFI records).
    asm volatile("movq $0x5a5a5a5a5a5a5a5a, %%rbp" ::: "rbp", "memory");
#endif
    r = descend(levels - 1, leaf, arg);
  }
  asm volatile("" ::: "memory");  // no tail call: every level stays a frame
  return r + 1;
}

}  // namespace provenance_nofp
