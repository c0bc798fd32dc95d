#include "report/report.hpp"
#include "report/python_frames.hpp"

#include "attrcheck/provenance.hpp"
#include "report/maps.hpp"
#include "report/symbol_table.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>

namespace attrcheck {

// ---- bounded string helpers (no allocation) ----------------------------------------------------

void copy_str(char* dst, std::size_t size, const char* src) noexcept {
  if (!size) return;
  std::size_t n = 0;
  if (src)
    for (; src[n] && n + 1 < size; ++n) dst[n] = src[n];
  dst[n] = '\0';
}

namespace {

void object_text(const FindingInput& in, Appender& a) noexcept {
  if (in.object_name && in.object_name[0]) {
    a.put(in.object_name);
    return;
  }
  a.put(to_string(in.kind));
  a.put(" ");
  a.hex(in.object);
}

// ---- JSON / text output to a file descriptor ----------------------------------------------------

class FdWriter {
 public:
  explicit FdWriter(int fd) noexcept : fd_(fd) {}
  ~FdWriter() { flush(); }
  bool ok() const noexcept { return ok_; }
  void raw(const char* s) noexcept {
    if (!s) return;
    while (*s) byte(*s++);
  }
  void str(const char* s) noexcept {  // a JSON string literal
    byte('"');
    for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : ""); *p; ++p) {
      const unsigned char c = *p;
      if (c == '"' || c == '\\') {
        byte('\\');
        byte(static_cast<char>(c));
      } else if (c < 0x20) {
        raw("\\u00");
        byte("0123456789abcdef"[c >> 4]);
        byte("0123456789abcdef"[c & 15]);
      } else {
        byte(static_cast<char>(c));
      }
    }
    byte('"');
  }
  void num(long long v) noexcept {
    char buf[32];
    Appender a{buf, sizeof buf};
    a.num(v);
    raw(buf);
  }
  void hex(unsigned long long v) noexcept {
    char buf[32];
    Appender a{buf, sizeof buf};
    a.hex(v);
    str(buf);
  }
  void key(const char* k) noexcept {
    str(k);
    byte(':');
  }
  void flush() noexcept {
    std::size_t off = 0;
    while (off < n_) {
      const ssize_t w = ::write(fd_, buf_ + off, n_ - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        ok_ = false;
        break;
      }
      off += static_cast<std::size_t>(w);
    }
    n_ = 0;
  }

 private:
  void byte(char c) noexcept {
    if (n_ == sizeof buf_) flush();
    buf_[n_++] = c;
  }
  int fd_;
  bool ok_ = true;
  std::size_t n_ = 0;
  char buf_[4096];
};

}  // namespace

void Appender::put(const char* s) noexcept {
  if (!s) return;
  for (; *s && n + 1 < size; ++s) out[n++] = *s;
  if (size) out[n] = '\0';
}

void Appender::num(long long v) noexcept {
  char buf[24];
  int i = 0;
  unsigned long long u = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do buf[i++] = static_cast<char>('0' + u % 10);
  while ((u /= 10) && i < 22);
  if (v < 0) buf[i++] = '-';
  char rev[24];
  for (int j = 0; j < i; ++j) rev[j] = buf[i - 1 - j];
  rev[i] = '\0';
  put(rev);
}

namespace {
volatile bool g_keyvals_in_hex = false;  // (a plain flag: read from the signal path too)
}  // namespace

void set_keyvals_in_hex(bool hex) noexcept { g_keyvals_in_hex = hex; }

void Appender::keyval(long long v) noexcept {
  if (g_keyvals_in_hex) hex(static_cast<std::uint32_t>(v));
  else num(v);
}

void Appender::hex(unsigned long long v) noexcept {
  char buf[20] = "0x";
  int i = 2;
  bool started = false;
  for (int shift = 60; shift >= 0; shift -= 4) {
    const unsigned d = (v >> shift) & 0xF;
    if (d || started || shift == 0) {
      buf[i++] = "0123456789abcdef"[d];
      started = true;
    }
  }
  buf[i] = '\0';
  put(buf);
}

void expand_template(const char* tmpl, const FindingInput& in, char* out, std::size_t size) noexcept {
  Appender a{out, size};
  if (size) out[0] = '\0';
  for (const char* p = tmpl; p && *p;) {
    if (*p != '{') {
      const char one[2] = {*p++, '\0'};
      a.put(one);
      continue;
    }
    const char* end = std::strchr(p, '}');
    if (!end) {
      a.put(p);
      break;
    }
    const std::size_t len = static_cast<std::size_t>(end - p - 1);
    auto is = [&](const char* name) { return std::strlen(name) == len && std::strncmp(p + 1, name, len) == 0; };
    if (is("call")) {
      a.put(in.call ? in.call : "?");
    } else if (is("keyval")) {
      if (in.has_keyval) a.keyval(in.keyval);
      else a.put("?");
    } else if (is("object")) {
      object_text(in, a);
    } else if (is("detail")) {
      a.put(in.detail ? in.detail : "");
    } else if (is("replacement")) {
      a.put(in.replacement ? in.replacement : "the replacement");
    } else {
      a.put("{?}");
    }
    p = end + 1;
  }
}

namespace {
// Our own module (libattrcheck.so, or the test executable): its frames are never the user's.
const void* own_base() noexcept {
  static const void* base = [] {
    Dl_info dl{};
    return dladdr(reinterpret_cast<const void*>(&own_base), &dl) ? dl.dli_fbase : nullptr;
  }();
  return base;
}

// The MPI library's modules, recognised by what they are, not by their file names: every module
// (the executable aside) that itself defines one of the library's entry points (PMPI_Init, or a
// Fortran binding's profiling twin), and every module those need (DT_NEEDED, transitively) but
// the C and C++ runtimes (the modules defining __libc_start_main, _r_debug, __cxa_throw,
// _Unwind_RaiseException, and what they need), which every program's frames pass through. Open
// MPI 6.0: libmpi.so.40 defines PMPI_Init over its core libopen_mpi.so.40 (with libpmix, libhwloc,
// libevent ...); Open MPI 4.1 and 5.0: libmpi.so.40 over libopen-pal / libopen-rte; MPICH:
// libmpich.so.12, and libmpifort.so.12 for Fortran. Worked out once, at the first stack resolved
// (libattrcheck.so links the library: it is loaded by then).
constexpr int kMpiModules = 512;
struct LoadedModule {
  const char* path;        // dl_phdr_info's name ("" for the executable)
  std::uintptr_t base;     // its load bias
  const ElfW(Dyn)* dynamic;
  const void* fbase;       // where it is mapped (Dl_info::dli_fbase)
  bool root, tool, mpi;
};
struct MpiModules {
  int n = 0;
  LoadedModule m[kMpiModules];
};

int collect_module(dl_phdr_info* info, std::size_t, void* data) noexcept {
  auto* all = static_cast<MpiModules*>(data);
  if (all->n >= kMpiModules) return 1;
  LoadedModule& lm = all->m[all->n++];
  lm = LoadedModule{info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr, nullptr, nullptr, false, false, false};
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      lm.dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  return 0;
}

// A dynamic entry's address: glibc relocates them in place (an unrelocated one is below the bias).
const char* string_table(const LoadedModule& lm) noexcept {
  if (!lm.dynamic) return nullptr;
  for (const ElfW(Dyn)* d = lm.dynamic; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == DT_STRTAB)
      return reinterpret_cast<const char*>(d->d_un.d_ptr < lm.base ? d->d_un.d_ptr + lm.base : d->d_un.d_ptr);
  return nullptr;
}

const char* base_name(const char* path) noexcept {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// The loaded module a DT_NEEDED name stands for (by its DT_SONAME, else its file name), or -1.
int needed_module(const MpiModules& all, const char* needed) noexcept {
  for (int i = 0; i < all.n; ++i) {
    const LoadedModule& lm = all.m[i];
    if (!lm.path[0]) continue;
    if (std::strcmp(base_name(lm.path), needed) == 0) return i;
    const char* strings = string_table(lm);
    for (const ElfW(Dyn)* d = lm.dynamic; strings && d->d_tag != DT_NULL; ++d)
      if (d->d_tag == DT_SONAME && std::strcmp(strings + d->d_un.d_val, needed) == 0) return i;
  }
  return -1;
}

// Marks (through `flag`) module i and everything it needs, not entering modules `stop` marks.
void mark_needed(MpiModules& all, int i, bool LoadedModule::*flag, bool LoadedModule::*stop, int depth) noexcept {
  if (depth > kMpiModules) return;
  const LoadedModule& lm = all.m[i];
  const char* strings = string_table(lm);
  for (const ElfW(Dyn)* d = lm.dynamic; strings && d->d_tag != DT_NULL; ++d) {
    if (d->d_tag != DT_NEEDED) continue;
    const int j = needed_module(all, strings + d->d_un.d_val);
    if (j < 0 || all.m[j].*flag || (stop && all.m[j].*stop)) continue;
    all.m[j].*flag = true;
    mark_needed(all, j, flag, stop, depth + 1);
  }
}

// Whether module `lm` itself defines `symbol` (not one of its dependencies).
bool defines(void* handle, const LoadedModule& lm, const char* symbol) noexcept {
  void* address = dlsym(handle, symbol);
  Dl_info dl{};
  link_map* map = nullptr;
  return address && dladdr1(address, &dl, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) && map &&
         map->l_addr == lm.base && map->l_ld == lm.dynamic;
}

const MpiModules& mpi_modules() noexcept {
  static const MpiModules* modules = [] {
    static MpiModules all;
    dl_iterate_phdr(collect_module, &all);  // (no dlopen inside: the loader's lock is held there)
    static const char* const kEntryPoints[] = {"PMPI_Init", "pmpi_init_", "pmpi_init__", "pmpi_init",
                                               "pmpi_init_f08_", "PMPI_INIT"};
    int own = -1;
    for (int i = 0; i < all.n; ++i) {
      LoadedModule& lm = all.m[i];
      Dl_info dl{};
      if (lm.dynamic && dladdr(lm.dynamic, &dl)) lm.fbase = dl.dli_fbase;
      if (lm.fbase && lm.fbase == own_base()) own = i;
      if (!lm.path[0] || i == own) continue;  // the executable: the program's own code (and attrcheck)
      void* handle = dlopen(lm.path, RTLD_LAZY | RTLD_NOLOAD);
      if (!handle) continue;
      for (const char* symbol : kEntryPoints)
        if (defines(handle, lm, symbol)) lm.root = true;
      dlclose(handle);
    }
    // The C and C++ runtimes, by what they define.
    static const char* const kRuntimes[] = {"__libc_start_main", "_r_debug", "__cxa_throw", "_Unwind_RaiseException"};
    for (const char* symbol : kRuntimes) {
      Dl_info dl{};
      const void* address = dlsym(RTLD_DEFAULT, symbol);
      if (address && dladdr(address, &dl) && dl.dli_fbase == own_base())
        address = dlsym(RTLD_NEXT, symbol);  // attrcheck's own (__cxa_throw: throw_site.cpp): the runtime's is next
      if (!address || !dladdr(address, &dl)) continue;
      for (int i = 0; i < all.n; ++i) {
        if (all.m[i].fbase != dl.dli_fbase || all.m[i].tool || all.m[i].root || !all.m[i].path[0]) continue;
        all.m[i].tool = true;
        mark_needed(all, i, &LoadedModule::tool, &LoadedModule::root, 0);
      }
    }
    for (int i = 0; i < all.n; ++i)
      if (all.m[i].root) {
        all.m[i].mpi = true;
        mark_needed(all, i, &LoadedModule::mpi, &LoadedModule::tool, 0);
      }
    for (int i = 0; i < all.n; ++i)
      if (all.m[i].tool && !all.m[i].root) all.m[i].mpi = false;
    return &all;
  }();
  return *modules;
}

bool is_mpi_module(const void* fbase) noexcept {
  const MpiModules& all = mpi_modules();
  for (int i = 0; i < all.n; ++i)
    if (all.m[i].mpi && all.m[i].fbase == fbase) return true;
  return false;
}

bool is_tool_frame(const Dl_info& dl) noexcept {
  if (dl.dli_fbase == own_base()) return true;
  if (std::strncmp(base_name(dl.dli_fname ? dl.dli_fname : ""), "libattrcheck", 12) == 0) return true;
  return is_mpi_module(dl.dli_fbase);
}
}  // namespace

void module_path(const char* name, char* out, std::size_t size) noexcept {
  char absolute[PATH_MAX];
  const bool relative = name[0] != '/' && realpath(name, absolute);
  copy_str(out, size, relative ? absolute : name);
}

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

namespace {
// A keyval's callback as a finding keeps it: the predefined one's name, else MODULE+0xOFFSET of
// the function's entry (0xADDRESS where no module holds it).
void describe_callback(const char* name, const void* fn, char* out, std::size_t size) noexcept {
  Appender a{out, size};
  if (name) {
    a.put(name);
    return;
  }
  Dl_info dl{};
  if (fn && dladdr(fn, &dl) && dl.dli_fname) {
    char path[PATH_MAX];
    module_path(dl.dli_fname, path, sizeof path);
    a.put(path);
    a.put("+");
    a.hex(static_cast<unsigned long long>(static_cast<const char*>(fn) - static_cast<const char*>(dl.dli_fbase)));
    return;
  }
  a.hex(reinterpret_cast<std::uintptr_t>(fn));
}
}  // namespace

void FindingStore::record(const FindingInput& in) noexcept { record_impl(in, false); }
void FindingStore::record_async_signal_safe(const FindingInput& in) noexcept { record_impl(in, true); }

namespace {
// Text into a running FNV-1a hash, with hexadecimal numbers (handles, addresses) left out.
std::uint64_t hash_text(const char* s, std::uint64_t h) noexcept {
  while (s && *s) {
    if (s[0] == '0' && s[1] == 'x') {
      for (s += 2; (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'); ++s) {}
      h = (h ^ '#') * 0x100000001b3ULL;
      continue;
    }
    h = (h ^ static_cast<unsigned char>(*s++)) * 0x100000001b3ULL;
  }
  return (h ^ '|') * 0x100000001b3ULL;
}

// A message's identity without building it: what the rule's template fills in, with hex numbers
// left out, as the merge of rank reports does ({call} and {keyval} are compared on their own). So
// MPI_COMM_WORLD and MPI_COMM_SELF freed at one site are two findings, while one site failing on
// many anonymous handles ("comm 0x...") stays one.
std::uint64_t message_identity(const char* tmpl, const FindingInput& in) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char* p = tmpl ? std::strchr(tmpl, '{') : nullptr; p; p = std::strchr(p, '{')) {
    const char* end = std::strchr(p, '}');
    if (!end) break;
    const std::size_t len = static_cast<std::size_t>(end - p - 1);
    auto is = [&](const char* name) { return std::strlen(name) == len && std::strncmp(p + 1, name, len) == 0; };
    if (is("object")) h = hash_text(in.object_name && in.object_name[0] ? in.object_name : to_string(in.kind), h);
    else if (is("detail")) h = hash_text(in.detail, h);
    else if (is("replacement")) h = hash_text(in.replacement, h);
    p = end + 1;
  }
  return h;
}
}  // namespace

namespace {
// The entries, then the stack index (both zero until touched).
constexpr std::size_t kEntriesBytes = FindingStore::kCapacity * sizeof(Finding);
}  // namespace

FindingStore::FindingStore() noexcept {
  static_assert(kStackIndex > kCapacity * (1 + kMaxProvenance), "the stack index never fills");
  static_assert(kEntriesBytes % alignof(StackIndexSlot) == 0);
  const std::size_t bytes = kEntriesBytes + kStackIndex * sizeof(StackIndexSlot);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    entries_ = nullptr;
    return;
  }
  entries_ = static_cast<Finding*>(p);
  stack_index_ = reinterpret_cast<StackIndexSlot*>(static_cast<char*>(p) + kEntriesBytes);
}

FindingStore::~FindingStore() {
  if (python_) ::munmap(python_, kPythonFrames * sizeof(PythonFrame));
  if (!entries_) return;
  for (std::size_t i = 0, n = size(); i < n; ++i) entries_[i].~Finding();
  ::munmap(entries_, kEntriesBytes + kStackIndex * sizeof(StackIndexSlot));
}

void FindingStore::record_impl(const FindingInput& in, bool signal_safe) noexcept {
  const RuleInfo& info = rule_info(in.rule);
  const std::uint64_t message_hash = message_identity(info.message, in);
  const void* python_site = !signal_safe && in.python_depth > 0 && in.python_frames ? in.python_frames[0] : nullptr;
  // The same rule at the same site from the same call with the same message (for the same
  // keyval) is one finding: count it. Entries are only ever appended and committed once filled,
  // so this scan needs no lock.
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i) {
    Finding& f = entries_[i];
    if (!f.committed.load(std::memory_order_acquire)) continue;
    // The keyval is part of the identity: two keyvals leaked at one MPI_Finalize are two findings.
    if (f.rule == in.rule && f.site == in.site && f.python_site == python_site && f.message_hash == message_hash &&
        f.has_keyval == in.has_keyval &&
        (!in.has_keyval || f.keyval == in.keyval) && std::strncmp(f.call, in.call ? in.call : "", sizeof f.call) == 0) {
      f.count.fetch_add(1, std::memory_order_relaxed);
      version_.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  // A new finding: one writer at a time. A signal handler must not wait (the interrupted code may
  // hold the flag), so it gives up instead.
  if (!take_writer(!signal_safe)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::size_t slot = used_.load(std::memory_order_relaxed);
  if (slot >= kCapacity || !entries_) {
    busy_.store(false, std::memory_order_release);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Finding& f = *new (&entries_[slot]) Finding;  // plain stores into the mapping: signal-safe
  f.rule = in.rule;
  f.site = in.site;
  f.site_is_entry = in.site_is_entry;
  f.python_site = python_site;
  f.python_site_frame = python_site ? intern_python(python_site) : -1;
  f.message_hash = message_hash;
  f.has_keyval = in.has_keyval;
  f.keyval = in.keyval;
  f.has_object = in.has_object;
  f.kind = in.kind;
  f.object = in.object;
  copy_str(f.call, sizeof f.call, in.call);
  copy_str(f.object_name, sizeof f.object_name, in.object_name);
  expand_template(info.message, in, f.message, sizeof f.message);
  expand_template(info.hint, in, f.hint, sizeof f.hint);
  f.symbol[0] = f.module[0] = '\0';
  f.offset = 0;
  if (in.site_symbol) {
    copy_str(f.symbol, sizeof f.symbol, in.site_symbol);
  } else if (signal_safe && in.site) {
    modules_from_maps(&in.site, 1, [](void* c, int, const char* path, std::uint64_t offset) {
      auto* out = static_cast<Finding*>(c);
      copy_str(out->module, sizeof out->module, path);
      out->offset = offset;
    }, &f);
  } else if (!signal_safe && in.site) {
    Dl_info dl{};
    if (dladdr(in.site, &dl) && dl.dli_fname) {
      module_path(dl.dli_fname, f.module, sizeof f.module);
      f.offset = static_cast<std::uint64_t>(static_cast<const char*>(in.site) - static_cast<const char*>(dl.dli_fbase));
      if (dl.dli_sname) {
        Appender a{f.symbol, sizeof f.symbol};
        a.put(dl.dli_sname);
        a.put("+");
        a.hex(static_cast<unsigned long long>(static_cast<const char*>(in.site) - static_cast<const char*>(dl.dli_saddr)));
      }
    }
  }
  f.has_callbacks = in.has_callbacks && !signal_safe;  // (dladdr is not async-signal-safe)
  if (f.has_callbacks) {
    describe_callback(in.callbacks.copy_name, in.callbacks.copy_fn, f.copy_callback, sizeof f.copy_callback);
    describe_callback(in.callbacks.delete_name, in.callbacks.delete_fn, f.delete_callback, sizeof f.delete_callback);
    f.extra_state = in.callbacks.extra_state;
  }
  f.stack.depth = 0;
  f.provenance_count = 0;
  if (signal_safe && in.fault_stack && in.fault_stack_depth > 0 && stack_depth_ > 0)
    resolve_stack_async_signal_safe(in.fault_stack, in.fault_stack_depth, stack_depth_, &f.stack);
  if (!signal_safe && stack_depth_ > 0 && !in.no_stack) {
    void* frames[kStackFrames + 24];
    const int captured = capture_stack(frames, stack_depth_ + 24, 0);
    if (python_site) {
      void* merged[kStackFrames * 2 + 24];
      const int merged_depth = merge_python_frames(frames, captured, in.python_frames, std::min(in.python_depth, kStackFrames),
                                        merged, static_cast<int>(sizeof merged / sizeof *merged));
      resolve_stack(merged, merged_depth, stack_depth_, &f.stack);
    } else {
      resolve_stack(frames, captured, stack_depth_, &f.stack);
    }
    for (int i = 0; i < in.provenance_count && i < kMaxProvenance; ++i) {
      const ProvenanceInput& p = in.provenance[i];
      if (!p.what || p.depth <= 0) continue;
      Finding::Provenance& out = f.provenance[f.provenance_count++];
      copy_str(out.what, sizeof out.what, p.what);
      resolve_stack(p.frames, p.depth, stack_depth_, &out.stack);
    }
  }
  number_stack(f.stack);
  for (int k = 0; k < f.provenance_count; ++k) number_stack(f.provenance[k].stack);
  f.count.store(1, std::memory_order_relaxed);
  f.committed.store(true, std::memory_order_release);
  used_.store(slot + 1, std::memory_order_release);
  version_.fetch_add(1, std::memory_order_release);
  // On disk before anything else can happen to the process (still the only writer: in order).
  if (Journal* j = journal_.load(std::memory_order_acquire)) j->append(*this, slot);
  busy_.store(false, std::memory_order_release);
}

bool FindingStore::take_writer(bool wait) noexcept {
  timespec start{};
  for (unsigned tried = 0; busy_.exchange(true, std::memory_order_acquire); ++tried) {
    if (!wait) return false;
    if (tried < 100) continue;
    if (tried == 100) clock_gettime(CLOCK_MONOTONIC, &start);
    sched_yield();
    if (tried % 256) continue;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= 2) return false;
  }
  return true;
}

void FindingStore::mark_gathered() noexcept {
  // (A writer stuck in a signal handler: marked all the same.)
  const bool taken = take_writer(true);
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i) {
    Finding& f = entries_[i];
    if (f.committed.load(std::memory_order_acquire)) f.gathered.store(f.count.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  if (Journal* j = journal_.load(std::memory_order_acquire)) j->mark_gathered(n);
  version_.fetch_add(1, std::memory_order_release);
  if (taken) busy_.store(false, std::memory_order_release);
}

void FindingStore::release_journal() noexcept {
  Journal* j = journal_.load(std::memory_order_acquire);
  if (!j) return;
  if (!take_writer(true)) return;
  j->hold(false);
  if (!j->active())
    for (std::size_t i = 0, n = size(); i < n; ++i) j->append(*this, i);
  busy_.store(false, std::memory_order_release);
}

void FindingStore::counts(std::uint64_t out[3]) const noexcept {
  out[0] = out[1] = out[2] = 0;
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i) {
    const Finding& f = entries_[i];
    if (!f.committed.load(std::memory_order_acquire)) continue;
    out[static_cast<int>(rule_info(f.rule).severity)] += f.count.load(std::memory_order_relaxed);
  }
}

bool FindingStore::any_at_or_above(int threshold) const noexcept {
  if (threshold < 0) return false;
  std::uint64_t c[3];
  counts(c);
  for (int s = 0; s <= threshold && s < 3; ++s)
    if (c[s]) return true;
  return false;
}

namespace {
// What the in-process pass found for a frame or site (symbolize.hpp): "function", "file" and
// "line" where it found them, and "symbolized": true on every address it attempted, so that
// attrcheck-report's pass leaves them alone.
void render_symbol(FdWriter& w, const SymbolTable* table, const void* address, bool entry) noexcept {
  const SymbolEntry* e = table && address ? table->find(lookup_pc(address, entry)) : nullptr;
  if (!e) return;
  if (e->function[0]) { w.raw(","); w.key("function"); w.str(e->function); }
  if (e->file[0]) { w.raw(","); w.key("file"); w.str(e->file); w.raw(","); w.key("line"); w.num(e->line); }
  w.raw(","); w.key("symbolized"); w.raw("true");
}

// A Python frame: {"python": true, "file": ..., "line": N, "function": ...}.
void render_python_frame(FdWriter& w, const FindingStore::PythonFrame& py) noexcept {
  w.raw("{"); w.key("python"); w.raw("true"); w.raw(",");
  w.key("file"); w.str(py.file); w.raw(",");
  w.key("line"); w.num(py.line); w.raw(",");
  w.key("function"); w.str(py.function);
  w.raw("}");
}

// One finding as a JSON object; `stack_id(stack)` is the id its stacks are written under.
template <typename StackId>
void render_finding(FdWriter& w, int rank, const Finding& f, const FindingStore& store, StackId stack_id) noexcept {
  const SymbolTable* symbols = store.symbols();
  const RuleInfo& info = rule_info(f.rule);
  w.raw("{");
  w.key("rule"); w.str(info.id); w.raw(",");
  w.key("severity"); w.str(to_string(info.severity)); w.raw(",");
  w.key("message"); w.str(f.message); w.raw(",");
  w.key("hint"); w.str(f.hint); w.raw(",");
  w.key("call"); w.str(f.call); w.raw(",");
  w.key("rank"); w.num(rank); w.raw(",");
  w.key("count"); w.num(static_cast<long long>(f.count.load(std::memory_order_relaxed)));
  if (const std::uint64_t g = f.gathered.load(std::memory_order_relaxed)) {
    w.raw(","); w.key("gathered_count"); w.num(static_cast<long long>(g));
  }
  if (f.has_keyval) { w.raw(","); w.key("keyval"); w.num(f.keyval); }
  if (f.has_callbacks) {
    w.raw(","); w.key("keyval_callbacks"); w.raw("{");
    w.key("copy"); w.str(f.copy_callback); w.raw(",");
    w.key("delete"); w.str(f.delete_callback); w.raw(",");
    w.key("extra_state"); w.hex(f.extra_state);
    w.raw("}");
  }
  if (f.has_object) {
    w.raw(","); w.key("object"); w.raw("{");
    w.key("kind"); w.str(to_string(f.kind)); w.raw(",");
    w.key("handle"); w.hex(f.object);
    if (f.object_name[0]) { w.raw(","); w.key("name"); w.str(f.object_name); }
    w.raw("}");
  }
  if (f.stack.depth) { w.raw(","); w.key("stack"); w.num(stack_id(f.stack)); }
  if (f.provenance_count) {
    w.raw(","); w.key("provenance"); w.raw("[");
    for (int k = 0; k < f.provenance_count; ++k) {
      if (k) w.raw(",");
      w.raw("{"); w.key("what"); w.str(f.provenance[k].what);
      if (f.provenance[k].stack.depth) { w.raw(","); w.key("stack"); w.num(stack_id(f.provenance[k].stack)); }
      w.raw("}");
    }
    w.raw("]");
  }
  w.raw(","); w.key("site"); w.raw("{");
  w.key("address"); w.hex(reinterpret_cast<std::uintptr_t>(f.site)); w.raw(",");
  w.key("offset"); w.hex(f.offset); w.raw(",");
  w.key("symbol"); w.str(f.symbol); w.raw(",");
  w.key("module"); w.str(f.module);
  // A callback's entry address names its function as is; a return address is symbolized at
  // the call before it.
  if (f.site_is_entry) { w.raw(","); w.key("entry"); w.raw("true"); }
  render_symbol(w, symbols, f.site, f.site_is_entry);
  // Made from Python: the innermost Python frame, part of the finding's identity.
  if (const FindingStore::PythonFrame* py = store.python_frame(f.python_site_frame)) {
    w.raw(","); w.key("python"); render_python_frame(w, *py);
  }
  w.raw("}}");
}

// A stack of the depot: {"id": N, "frames": [...]}.
void render_stack(FdWriter& w, const FindingStore& store, int id, const StackRec& s) noexcept {
  w.raw("{"); w.key("id"); w.num(id); w.raw(","); w.key("frames"); w.raw("[");
  for (int i = 0; i < s.depth; ++i) {
    if (i) w.raw(",");
    if (const FindingStore::PythonFrame* py = store.python_frame(s.frames[i].python)) {
      render_python_frame(w, *py);
      continue;
    }
    w.raw("{"); w.key("address"); w.hex(reinterpret_cast<std::uintptr_t>(s.frames[i].address)); w.raw(",");
    w.key("module"); w.str(store.module(s.frames[i].module)); w.raw(",");
    w.key("offset"); w.hex(s.frames[i].offset);
    if (s.frames[i].entry) { w.raw(","); w.key("entry"); w.raw("true"); }
    render_symbol(w, store.symbols(), s.frames[i].address, s.frames[i].entry);
    w.raw("}");
  }
  w.raw("]}");
}
}  // namespace

namespace {
// What a rank report and a journal both begin with: '{', the schema, the tool, and the run's
// identity ("run": { ... left open, so the report can add its status).
void render_header(FdWriter& w, const char* schema, const RunInfo& run) noexcept {
  w.raw("{");
  w.key("schema"); w.str(schema); w.raw(",");
  w.key("version"); w.str(kReportVersion); w.raw(",");
  w.key("tool"); w.raw("{"); w.key("name"); w.str("attrcheck"); w.raw(","); w.key("version"); w.str(kToolVersion); w.raw("},");
  w.key("run"); w.raw("{");
  w.key("rank"); w.num(run.rank); w.raw(",");
  w.key("size"); w.num(run.size); w.raw(",");
  w.key("pid"); w.num(run.pid); w.raw(",");
  w.key("job"); w.str(run.job); w.raw(",");
  w.key("spawned"); w.raw(run.spawned ? "true" : "false"); w.raw(",");
  w.key("mode"); w.str(run.mode); w.raw(",");
  w.key("on_error"); w.str(run.on_error); w.raw(",");
  w.key("thread_level"); w.str(run.thread_level); w.raw(",");
  w.key("mpi_library"); w.str(run.mpi_library); w.raw(",");
  w.key("mpi_profile"); w.str(run.mpi_profile);
}
}  // namespace

bool render_json(int fd, const RunInfo& run, const FindingStore& store) noexcept {
  FdWriter w(fd);
  std::uint64_t c[3];
  store.counts(c);
  render_header(w, kReportSchema, run);
  w.raw(",");
  w.key("status"); w.str(run.status.load(std::memory_order_acquire)); w.raw(",");
  w.key("signal"); w.num(run.signal.load(std::memory_order_relaxed));
  w.raw("},\n");
  w.key("summary"); w.raw("{");
  w.key("error"); w.num(static_cast<long long>(c[0])); w.raw(",");
  w.key("warning"); w.num(static_cast<long long>(c[1])); w.raw(",");
  w.key("info"); w.num(static_cast<long long>(c[2])); w.raw(",");
  w.key("dropped"); w.num(static_cast<long long>(store.dropped()));
  w.raw("},\n");
  if (run.call_counts) {  // {"keyval": {"c": N, "fortran": N, "f08": N}, "attribute": ...}
    std::uint64_t n[kCallFamilies][kCallBindings];
    run.call_counts(n);
    w.key("intercepted"); w.raw("{");
    for (int f = 0; f < kCallFamilies; ++f) {
      if (f) w.raw(",");
      w.key(kCallFamilyNames[f]); w.raw("{");
      for (int b = 0; b < kCallBindings; ++b) {
        if (b) w.raw(",");
        w.key(kCallBindingNames[b]); w.num(static_cast<long long>(n[f][b]));
      }
      w.raw("}");
    }
    w.raw("},\n");
  }
  w.key("findings"); w.raw("[");
  bool first = true;
  for (std::size_t i = 0; i < store.size(); ++i) {
    const Finding& f = store.at(i);
    if (!f.committed.load(std::memory_order_acquire)) continue;
    w.raw(first ? "\n" : ",\n");
    first = false;
    render_finding(w, run.rank, f, store, [](const StackRec& st) { return st.id; });
  }
  w.raw(first ? "],\n" : "\n],\n");
  // The stack depot: every distinct stack once, at its first occurrence, referenced by id from
  // the findings (number_stack).
  w.key("stacks"); w.raw("[");
  bool first_stack = true;
  auto depot = [&](const StackRec& s) {
    if (!s.first) return;
    w.raw(first_stack ? "\n" : ",\n");
    first_stack = false;
    render_stack(w, store, s.id, s);
  };
  for (std::size_t i = 0; i < store.size(); ++i) {
    const Finding& f = store.at(i);
    if (!f.committed.load(std::memory_order_acquire)) continue;
    depot(f.stack);
    for (int k = 0; k < f.provenance_count; ++k) depot(f.provenance[k].stack);
  }
  w.raw(first_stack ? "]}\n" : "\n]}\n");
  w.flush();
  return w.ok();
}

void render_summary(int fd, const RunInfo& run, const FindingStore& store) noexcept {
  FdWriter w(fd);
  std::uint64_t c[3];
  store.counts(c);
  if (!c[0] && !c[1] && !c[2]) return;
  w.raw("==attrcheck== rank ");
  w.num(run.rank);
  w.raw(": ");
  w.num(static_cast<long long>(c[0])); w.raw(" error(s), ");
  w.num(static_cast<long long>(c[1])); w.raw(" warning(s), ");
  w.num(static_cast<long long>(c[2])); w.raw(" info\n");
  for (std::size_t i = 0; i < store.size(); ++i) {
    const Finding& f = store.at(i);
    if (!f.committed.load(std::memory_order_acquire)) continue;
    const RuleInfo& info = rule_info(f.rule);
    w.raw("==attrcheck==   ");
    w.raw(to_string(info.severity));
    w.raw(" ");
    w.raw(info.id);
    w.raw(" x");
    w.num(static_cast<long long>(f.count.load(std::memory_order_relaxed)));
    w.raw(": ");
    w.raw(f.message);
    const SymbolTable* symbols = store.symbols();
    const SymbolEntry* named = symbols && f.site ? symbols->find(lookup_pc(f.site, f.site_is_entry)) : nullptr;
    if (named && named->function[0]) {  // named in-process (symbolize.hpp)
      w.raw("\n==attrcheck==       at ");
      w.raw(named->function);
      if (named->file[0]) { w.raw(" ("); w.raw(named->file); w.raw(":"); w.num(named->line); w.raw(")"); }
    } else if (f.symbol[0]) {
      w.raw("\n==attrcheck==       at ");
      w.raw(f.symbol);
      if (f.module[0]) { w.raw(" ("); w.raw(f.module); w.raw(")"); }
    }
    w.raw("\n");
  }
}

void find_job_identity(char* out, std::size_t size) noexcept {
  if (!size) return;
  out[0] = '\0';
  const char* id = nullptr;
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
    id = std::getenv(name);
    if (id && *id) break;
  }
  std::size_t n = 0;
  for (; id && *id && n + 1 < size; ++id) {
    const char c = *id;
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '_' || c == '-';
    out[n++] = plain ? c : '_';
  }
  out[n] = '\0';
}

void report_file_name(const RunInfo& run, char* out, std::size_t size) noexcept {
  Appender a{out, size};
  if (size) out[0] = '\0';
  if (run.spawned) {
    a.put("job-");
    if (run.job[0]) {
      a.put(run.job);
    } else {
      a.put("pid");
      a.num(run.pid);
    }
    a.put("-");
  }
  a.put("rank-");
  a.num(run.rank);
  a.put(".json");
}

bool ReportFile::prepare(const char* dir, const char* name, char* error, std::size_t error_size) noexcept {
  path_[0] = tmp_[0] = '\0';
  if (!dir || !*dir) dir = ".";
  // mkdir -p
  char partial[1024];
  const std::size_t len = std::strlen(dir);
  if (len + std::strlen(name) + 2 >= sizeof path_) {
    std::snprintf(error, error_size, "output directory path too long: %s", dir);
    return false;
  }
  for (std::size_t i = 1; i <= len; ++i) {
    if (dir[i] == '/' || dir[i] == '\0') {
      std::memcpy(partial, dir, i);
      partial[i] = '\0';
      if (::mkdir(partial, 0755) != 0 && errno != EEXIST) {
        std::snprintf(error, error_size, "cannot create %s: %s", partial, std::strerror(errno));
        return false;
      }
    }
  }
  struct stat st{};
  if (::stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::snprintf(error, error_size, "%s is not a directory", dir);
    return false;
  }
  std::snprintf(path_, sizeof path_, "%s/%s", dir, name);
  std::snprintf(tmp_, sizeof tmp_, "%s/.%s.%ld.tmp", dir, name, static_cast<long>(::getpid()));
  return true;
}

bool ReportFile::write(const RunInfo& run, const FindingStore& store) noexcept {
  if (!ready()) return false;
  // O_NOFOLLOW | O_EXCL after unlink: never write through a symlink planted at the temp name.
  ::unlink(tmp_);
  const int fd = ::open(tmp_, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = render_json(fd, run, store);
  ok = (::fsync(fd) == 0 || errno == EINVAL) && ok;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(tmp_);
    return false;
  }
  return ::rename(tmp_, path_) == 0;  // rename replaces a symlink itself, never follows it
}

// ---- the journal -------------------------------------------------------------------------------

bool Journal::start(const char* path, const RunInfo& run, FindingStore& store, bool now) noexcept {
  finish(store);
  std::snprintf(path_, sizeof path_, "%s", path);
  run_ = &run;
  failed_ = false;
  store.set_journal(this);
  if (!now || store.size() == 0) return true;  // created by the next finding
  // Findings recorded already: the file now, as their last one would make it. (One recorded
  // meanwhile is appended twice: the merge keeps one line per seq.)
  append(store, store.size() - 1);
  return active();
}

bool Journal::open_file() noexcept {
  if (fd_.load(std::memory_order_acquire) >= 0) return true;
  if (failed_ || !path_[0] || !run_) return false;
  ::unlink(path_);  // O_EXCL after unlink: never append through a symlink planted there
  const int fd = ::open(path_, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    failed_ = true;
    return false;
  }
  {
    FdWriter w(fd);
    render_header(w, kJournalSchema, *run_);
    w.raw("}}\n");
  }
  fd_.store(fd, std::memory_order_release);
  return true;
}

void Journal::append(const FindingStore& store, std::size_t index) noexcept {
  if (fd_.load(std::memory_order_acquire) < 0) {
    if (held_.load(std::memory_order_acquire)) return;
    // The first finding: the file, with the header and every finding before this one.
    if (!open_file()) return;
    for (std::size_t i = 0; i < index && i < store.size(); ++i) append(store, i);
  }
  const int fd = fd_.load(std::memory_order_acquire);
  if (fd < 0 || index >= store.size()) return;
  const Finding& f = store.at(index);
  if (!f.committed.load(std::memory_order_acquire)) return;
  // Its stacks inline, numbered within the line: 1 its own, then its provenance's.
  FdWriter w(fd);
  w.raw("{"); w.key("seq"); w.num(static_cast<long long>(index)); w.raw(",");
  w.key("finding");
  render_finding(w, -1, f, store, [&](const StackRec& s) {
    if (&s == &f.stack) return 1;
    for (int k = 0; k < f.provenance_count; ++k)
      if (&s == &f.provenance[k].stack) return 2 + k;
    return 0;
  });
  w.raw(","); w.key("stacks"); w.raw("[");
  bool first = true;
  if (f.stack.depth) {
    render_stack(w, store, 1, f.stack);
    first = false;
  }
  for (int k = 0; k < f.provenance_count; ++k) {
    if (!f.provenance[k].stack.depth) continue;
    if (!first) w.raw(",");
    first = false;
    render_stack(w, store, 2 + k, f.provenance[k].stack);
  }
  w.raw("]}\n");
}

void Journal::mark_gathered(std::size_t count) noexcept {
  const int fd = fd_.load(std::memory_order_acquire);
  if (fd < 0) return;  // (made later, its lines say gathered_count themselves)
  FdWriter w(fd);
  w.raw("{"); w.key("gathered"); w.num(static_cast<long long>(count)); w.raw("}\n");
}

void Journal::finish(FindingStore& store) noexcept {
  store.set_journal(nullptr);
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path_);  // (never created: nothing to remove, and never a stranger's file)
  }
  path_[0] = '\0';
  run_ = nullptr;
  held_.store(false, std::memory_order_release);
}

}  // namespace attrcheck
