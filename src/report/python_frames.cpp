// The process's Python frame table and the merge of Python frames into native stacks
// (python_frames.hpp).
#include "report/python_frames.hpp"

#include <atomic>
#include <deque>
#include <mutex>
#include <string>

namespace attrcheck {

namespace {
struct PythonFrameText {
  std::string file, function;
  int line;
};
std::mutex g_table_mu;
std::deque<PythonFrameText>* g_table = nullptr;  // made on first use, never freed (read at exit)
std::atomic<std::uintptr_t> g_interp_begin{0}, g_interp_end{0};
}  // namespace

std::uint32_t python_frame_add(const char* file, const char* function, int line) {
  std::lock_guard<std::mutex> lock(g_table_mu);
  if (!g_table) g_table = new std::deque<PythonFrameText>;
  g_table->push_back(PythonFrameText{file ? file : "", function ? function : "", line});
  return static_cast<std::uint32_t>(g_table->size());
}

bool python_frame_text(std::uint32_t id, const char** file, const char** function, int* line) {
  std::lock_guard<std::mutex> lock(g_table_mu);
  if (!g_table || id == 0 || id > g_table->size()) return false;
  const PythonFrameText& t = (*g_table)[id - 1];  // (a deque never moves its elements)
  *file = t.file.c_str();
  *function = t.function.c_str();
  *line = t.line;
  return true;
}

void set_python_interpreter_range(const void* begin, const void* end) noexcept {
  g_interp_begin.store(reinterpret_cast<std::uintptr_t>(begin), std::memory_order_relaxed);
  g_interp_end.store(reinterpret_cast<std::uintptr_t>(end), std::memory_order_release);
}

int merge_python_frames(void* const* native, int native_depth, void* const* python, int python_depth, void** out,
                        int max) noexcept {
  const std::uintptr_t end = g_interp_end.load(std::memory_order_acquire);
  const std::uintptr_t begin = g_interp_begin.load(std::memory_order_relaxed);
  int at = native_depth;
  for (int i = 0; i < native_depth; ++i) {
    const auto a = reinterpret_cast<std::uintptr_t>(native[i]);
    if (a >= begin && a < end) {
      at = i;
      break;
    }
  }
  int n = 0;
  for (int i = 0; i < at && n < max; ++i) out[n++] = native[i];
  for (int i = 0; i < python_depth && n < max; ++i) out[n++] = python[i];
  for (int i = at; i < native_depth && n < max; ++i) out[n++] = native[i];
  return n;
}

}  // namespace attrcheck
