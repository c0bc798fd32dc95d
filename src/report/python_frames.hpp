// Python frames in stacks, as the report library sees them: no Python here (the runtime reads
// the interpreter's frames, src/runtime/python/). A Python frame travels in a stack of return
// addresses as a tagged word (the top bit set: never a user-space address on the 64-bit
// platforms attrcheck runs on) whose low bits name an entry of the process's Python frame table:
// file, function and line, copied when the frame was first seen. Stacks holding them are interned
// and compared like any other (StackDepot), and the report's writer turns each into a frame of its
// own (stacks.cpp, resolve_stack).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attrcheck {

inline constexpr std::uintptr_t kPythonFrameTag = std::uintptr_t{1} << (sizeof(void*) * 8 - 1);
inline bool is_python_frame(const void* frame) noexcept {
  return (reinterpret_cast<std::uintptr_t>(frame) & kPythonFrameTag) != 0;
}
inline std::uint32_t python_frame_id(const void* frame) noexcept {
  return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(frame) & 0xffffffffu);
}
inline void* python_frame_word(std::uint32_t id) noexcept {
  return reinterpret_cast<void*>(kPythonFrameTag | id);
}

// The process's Python frames: each distinct (file, function, line) the runtime met, by id.
// Thread-safe; normal path only (allocates, locks). Ids start at 1 and stay valid for the process.
std::uint32_t python_frame_add(const char* file, const char* function, int line);
// The frame's text (valid for the process's lifetime); false for an unknown id.
bool python_frame_text(std::uint32_t id, const char** file, const char** function, int* line);

// The interpreter's own machine code ([begin, end): the module holding the eval loop), set when
// the runtime found a Python it reads frames of. A stack's Python frames go just before its first
// native frame in there (merge_python_frames).
void set_python_interpreter_range(const void* begin, const void* end) noexcept;
// Native frames (innermost first) with the thread's Python frames (innermost first) placed
// before the first native frame of the interpreter (after all of them if none is in there): the
// extension module's frames that made the MPI call come first, then the Python code that called
// it, then the interpreter. At most `max` words in `out`; returns how many.
int merge_python_frames(void* const* native, int native_depth, void* const* python, int python_depth, void** out,
                        int max) noexcept;

}  // namespace attrcheck
