// A finding's stacks (report.hpp): frames resolved to module + offset, the MPI library's and
// attrcheck's innermost frames trimmed, Python frames interned, and each distinct stack numbered
// once for the report's depot.
#include "report/modules.hpp"
#include "report/python_frames.hpp"
#include "report/report.hpp"
#include "report/maps.hpp"

#include <link.h>
#include <sys/mman.h>

#include <climits>
#include <cstdint>
#include <cstring>

namespace attrcheck {

int FindingStore::intern_python(const void* word) noexcept {
  const std::uint32_t id = python_frame_id(word);
  const int n = python_used_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i)
    if (python_[i].id == id) return i;
  if (n >= kPythonFrames) return -1;
  if (!python_) {
    void* p = ::mmap(nullptr, kPythonFrames * sizeof(PythonFrame), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    python_ = static_cast<PythonFrame*>(p);
  }
  const char *file, *function;
  int line;
  if (!python_frame_text(id, &file, &function, &line)) return -1;
  PythonFrame& f = python_[n];
  f.id = id;
  f.line = line;
  copy_str(f.file, sizeof f.file, file);
  copy_str(f.function, sizeof f.function, function);
  python_used_.store(n + 1, std::memory_order_release);
  return n;
}

int FindingStore::intern_module(const char* path) noexcept {
  const int n = modules_used_.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i)
    if (std::strcmp(modules_[i], path) == 0) return i;
  if (n >= kModules) return -1;
  copy_str(modules_[n], sizeof modules_[n], path);
  modules_used_.store(n + 1, std::memory_order_release);
  return n;
}

namespace {
bool same_stack(const StackRec& a, const StackRec& b) noexcept {
  if (a.depth != b.depth) return false;
  for (int i = 0; i < a.depth; ++i)
    if (a.frames[i].address != b.frames[i].address || a.frames[i].entry != b.frames[i].entry) return false;
  return true;
}
}  // namespace

bool FindingStore::module_span(const void* pc, ModuleSpan* out) noexcept {
  if (!pc) return false;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
  // glibc's own lock-free lookup of the object holding an address: a module seen before is known.
  dl_find_object found{};
  const bool located = _dl_find_object(const_cast<void*>(pc), &found) == 0;
  for (int i = 0; located && i < spans_used_; ++i) {
    if (spans_[i].link_map != found.dlfo_link_map || spans_[i].start != found.dlfo_map_start) continue;
    *out = spans_[i];
    return true;
  }
#else
  struct { void* dlfo_map_start; void* dlfo_map_end; void* dlfo_link_map; } found{};
  const bool located = false;
#endif
  Dl_info dl{};
  if (!dladdr(pc, &dl) || !dl.dli_fname) return false;
  char path[PATH_MAX];
  module_path(dl.dli_fname, path, sizeof path);
  *out = ModuleSpan{found.dlfo_map_start, found.dlfo_map_end, found.dlfo_link_map, dl.dli_fbase,
                    intern_module(path), is_tool_frame(dl)};
  if (located && spans_used_ < kModules) spans_[spans_used_++] = *out;
  return true;
}

void FindingStore::number_stack(StackRec& s) noexcept {
  s.first = false;
  if (!s.depth) return;
  s.id = ++stacks_;
  s.first = true;
  if (!stack_index_) return;
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (int i = 0; i < s.depth; ++i) {
    h = (h ^ reinterpret_cast<std::uintptr_t>(s.frames[i].address)) * 0x100000001b3ULL;
    h = (h ^ static_cast<std::uint64_t>(s.frames[i].entry)) * 0x100000001b3ULL;
  }
  for (std::size_t i = h & (kStackIndex - 1);; i = (i + 1) & (kStackIndex - 1)) {
    StackIndexSlot& slot = stack_index_[i];
    if (!slot.stack) {
      slot = StackIndexSlot{h, &s};
      return;
    }
    if (slot.hash == h && same_stack(*slot.stack, s)) {
      s.id = slot.stack->id;
      s.first = false;
      return;
    }
  }
}

void FindingStore::resolve_stack(const void* const* frames, int depth, int max_depth, StackRec* out) noexcept {
  out->depth = 0;
  bool user_seen = false;
  for (int i = 0; i < depth && out->depth < max_depth && out->depth < kStackFrames; ++i) {
    if (is_python_frame(frames[i])) {  // a frame of the Python code (python_frames.hpp)
      const int python = intern_python(frames[i]);
      if (python < 0) continue;
      user_seen = true;
      Frame& f = out->frames[out->depth++];
      f = Frame{frames[i], 0, -1, false, python};
      continue;
    }
    ModuleSpan span{};
    const bool known = module_span(frames[i], &span);
    if (!user_seen && known && span.tool) continue;  // trim the innermost tool frames
    user_seen = true;
    Frame& f = out->frames[out->depth++];
    f.address = frames[i];
    f.entry = false;
    f.python = -1;
    f.offset = known ? static_cast<std::uint64_t>(static_cast<const char*>(frames[i]) -
                                                  static_cast<const char*>(span.base))
                     : 0;
    f.module = known ? span.module : -1;
  }
}

// The signal path's: modules from /proc/self/maps (maps.hpp), nothing trimmed (the handler
// captured from the frame the signal hit), the first frame that instruction itself.
void FindingStore::resolve_stack_async_signal_safe(const void* const* frames, int depth, int max_depth,
                                                   StackRec* out) noexcept {
  out->depth = 0;
  for (int i = 0; i < depth && out->depth < max_depth && out->depth < kStackFrames; ++i) {
    Frame& f = out->frames[out->depth++];
    f.address = frames[i];
    f.offset = 0;
    f.module = -1;
    f.entry = i == 0;
    f.python = -1;  // (no Python frames on the signal path)
  }
  struct Context {
    FindingStore* store;
    StackRec* out;
  } context{this, out};
  modules_from_maps(frames, out->depth, [](void* c, int i, const char* path, std::uint64_t offset) {
    auto* x = static_cast<Context*>(c);
    x->out->frames[i].offset = offset;
    x->out->frames[i].module = x->store->intern_module(path);
  }, &context);
}

}  // namespace attrcheck
