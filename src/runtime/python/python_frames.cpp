// The calling thread's Python frames through CPython's C API (python_frames.hpp); what differs
// between versions is in python_profile.hpp.
#include "runtime/python/python_frames.hpp"

#include <dlfcn.h>
#include <link.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "report/python_frames.hpp"
#include "runtime/python/python_profile.hpp"

namespace attrcheck::rt::python {

namespace {
using Obj = void;  // a PyObject*, never looked into
struct Api {
  const PythonVersion* version;
  void* (*thread_state)();       // PythonVersion::thread_state
  void* (*this_thread_state)();  // PyGILState_GetThisThreadState (GilCheck::HolderIsThisThread)
  int (*is_initialized)();
  Obj* (*get_frame)(void*);  // PyThreadState_GetFrame: new reference
  Obj* (*frame_back)(Obj*);  // PyFrame_GetBack: new reference
  Obj* (*frame_code)(Obj*);  // PyFrame_GetCode: new reference
  int (*frame_lasti)(Obj*);
  int (*frame_line)(Obj*);
  void (*incref)(Obj*);
  void (*decref)(Obj*);
  Obj* (*getattr)(Obj*, const char*);
  const char* (*utf8)(Obj*);
  Obj* (*err_occurred)();
  void (*err_clear)();
  void (*err_fetch)(Obj**, Obj**, Obj**);
  void (*err_restore)(Obj*, Obj*, Obj*);
  int (*gc_disable)();
  int (*gc_enable)();
  // For mpi4py's callbacks (mpi4py_callback): optional, all in the stable C API.
  int (*gil_ensure)();           // PyGILState_Ensure (a PyGILState_STATE, an enum)
  void (*gil_release)(int);      // PyGILState_Release
  Obj* (*sys_object)(const char*);  // PySys_GetObject: borrowed
  Obj* (*dict_item)(Obj*, const char*);  // PyDict_GetItemString: borrowed
  long (*as_long)(Obj*);         // PyLong_AsLong
  bool callbacks = false;        // all of these found
  // For calls made without the GIL (python_profile.hpp, RawFrames): optional.
  const RawFrames* raw = nullptr;      // this version's row, all of the below found
  void* (*own_thread_state)() = nullptr;  // PyGILState_GetThisThreadState
  int (*addr2line)(Obj*, int) = nullptr;  // PyCode_Addr2Line (reads the code object only)
  const void* code_type = nullptr;        // &PyCode_Type
  const void* str_type = nullptr;         // &PyUnicode_Type
};
Api g_api;
char g_version[16] = "";
char g_unread[16] = "";  // a Python found but not read (unread_version)
// Testing only (ATTRCHECK_PYTHON_FRAMES=misread): the version's row with every offset 8 bytes
// off, as a wrong row would be; the check must refuse it, and no read may fault.
RawFrames g_misread{};

template <typename Fn>
bool find(Fn& fn, const char* name) noexcept {
  fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
  return fn != nullptr;
}

// The executable segment of the module holding `address`: the interpreter's machine code.
struct Segment {
  std::uintptr_t address, begin = 0, end = 0;
};
int find_segment(dl_phdr_info* info, std::size_t, void* data) noexcept {
  auto* s = static_cast<Segment*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const std::uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (s->address >= begin && s->address < begin + ph.p_memsz) {
      s->begin = begin;
      s->end = begin + ph.p_memsz;
      return 1;
    }
  }
  return 0;
}

bool resolve(Api& a) noexcept {
  const auto* hex = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));  // 3.11 on
  if (!hex) return false;
  const int major = static_cast<int>((*hex >> 24) & 0xff), minor = static_cast<int>((*hex >> 16) & 0xff);
  // Until everything below is found, this Python is one whose frames are not read.
  std::snprintf(g_unread, sizeof g_unread, "%d.%d", major, minor);
  a.version = nullptr;
  for (const PythonVersion& v : kPythonVersions)
    if (v.major == major && v.minor == minor) a.version = &v;
  // Testing only: ATTRCHECK_PYTHON_FRAMES=unlisted takes this Python as one the table does not list.
  const char* env = std::getenv("ATTRCHECK_PYTHON_FRAMES");
  if (env && !std::strcmp(env, "unlisted")) a.version = nullptr;
  if (!a.version) return false;  // a version not checked: no frames rather than a guess
  if (!find(a.thread_state, a.version->thread_state)) return false;
  if (a.version->gil == GilCheck::HolderIsThisThread && !find(a.this_thread_state, "PyGILState_GetThisThreadState"))
    return false;
  if (!find(a.is_initialized, "Py_IsInitialized") || !find(a.get_frame, "PyThreadState_GetFrame") ||
      !find(a.frame_back, "PyFrame_GetBack") || !find(a.frame_code, "PyFrame_GetCode") ||
      !find(a.frame_lasti, "PyFrame_GetLasti") || !find(a.frame_line, "PyFrame_GetLineNumber") ||
      !find(a.incref, "Py_IncRef") || !find(a.decref, "Py_DecRef") || !find(a.getattr, "PyObject_GetAttrString") ||
      !find(a.utf8, "PyUnicode_AsUTF8") || !find(a.err_occurred, "PyErr_Occurred") ||
      !find(a.err_clear, "PyErr_Clear") || !find(a.err_fetch, "PyErr_Fetch") || !find(a.err_restore, "PyErr_Restore") ||
      !find(a.gc_disable, "PyGC_Disable") || !find(a.gc_enable, "PyGC_Enable"))
    return false;
  a.callbacks = find(a.gil_ensure, "PyGILState_Ensure") && find(a.gil_release, "PyGILState_Release") &&
                find(a.sys_object, "PySys_GetObject") && find(a.dict_item, "PyDict_GetItemString") &&
                find(a.as_long, "PyLong_AsLong");
  for (const RawFrames& row : kRawFrames)
    if (row.major == major && row.minor == minor) a.raw = &row;
  if (a.raw && env && !std::strcmp(env, "misread")) {
    g_misread = *a.raw;
    for (unsigned long* field : {&g_misread.tstate_frame, &g_misread.frame_code, &g_misread.frame_previous,
                                 &g_misread.frame_instr, &g_misread.code_filename, &g_misread.code_qualname})
      *field += 8;
    a.raw = &g_misread;
  }
  a.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
  a.str_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
  if (!find(a.addr2line, "PyCode_Addr2Line") || !a.code_type || !a.str_type) a.raw = nullptr;
  find(a.own_thread_state, "PyGILState_GetThisThreadState");
  // Where the interpreter's own machine code is: a stack's Python frames go before its first
  // native frame in there (merge_python_frames).
  Segment s{reinterpret_cast<std::uintptr_t>(dlsym(RTLD_DEFAULT, "PyEval_EvalCode"))};
  if (!s.address || !dl_iterate_phdr(find_segment, &s)) return false;
  set_python_interpreter_range(reinterpret_cast<const void*>(s.begin), reinterpret_cast<const void*>(s.end));
  std::snprintf(g_version, sizeof g_version, "%d.%d", major, minor);
  g_unread[0] = '\0';
  return true;
}

// Whether this thread holds the GIL, and its thread state (python_profile.hpp, GilCheck).
void* held_state(const Api& a) noexcept {
  if (!a.is_initialized()) return nullptr;
  void* state = a.thread_state();
  if (!state) return nullptr;
  if (a.version->gil == GilCheck::HolderIsThisThread && state != a.this_thread_state()) return nullptr;
  return state;
}

// Each code object's file and function (co_filename, co_qualname), read once; the code objects
// met are kept (a reference each), so that a code object's address names it for the process's
// lifetime and the per-thread memory below can never name a newer one at a reused address.
// A frame is (code, line): each distinct one has its python_frames.hpp id. Guarded by g_mu (and
// the GIL: only a thread holding it gets here).
struct CodeText {
  std::string file, function;
};
std::mutex g_mu;
std::unordered_map<const Obj*, CodeText>* g_codes = nullptr;
std::map<std::pair<const Obj*, int>, void*>* g_frames = nullptr;  // (code, line) -> tagged word
// (file, function, line) -> tagged word: one word for one frame text, whichever way it was read.
std::map<std::tuple<std::string, std::string, int>, void*>* g_texts = nullptr;

// The tagged word of a frame text, found or made (g_mu held; may throw: memory).
void* word_for_text(const std::string& file, const std::string& function, int line) {
  if (!g_texts) g_texts = new std::map<std::tuple<std::string, std::string, int>, void*>;
  void*& word = (*g_texts)[std::make_tuple(file, function, line)];
  if (!word) word = python_frame_word(python_frame_add(file.c_str(), function.c_str(), line));
  return word;
}

// The attribute's text (UTF-8), or "" (no object, no such attribute, not a str), with the error
// that raised cleared.
std::string text_of(const Api& a, Obj* object, const char* attribute) {
  if (!object) return {};
  Obj* s = a.getattr(object, attribute);
  if (!s) {
    a.err_clear();
    return {};
  }
  const char* utf8 = a.utf8(s);
  std::string out = utf8 ? utf8 : "";
  if (!utf8) a.err_clear();
  a.decref(s);
  return out;
}

// A code object's file and function (co_qualname, else co_name).
CodeText code_text(const Api& a, Obj* code) {
  CodeText t{text_of(a, code, "co_filename"), text_of(a, code, "co_qualname")};
  if (t.function.empty()) t.function = text_of(a, code, "co_name");
  return t;
}

// The tagged word of `frame` (code object `code`), found or made. Null if it cannot be (memory).
void* word_of(const Api& a, Obj* frame, Obj* code) noexcept {
  try {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_codes) g_codes = new std::unordered_map<const Obj*, CodeText>, g_frames = new std::map<std::pair<const Obj*, int>, void*>;
    auto it = g_codes->find(code);
    if (it == g_codes->end()) {
      it = g_codes->emplace(code, code_text(a, code)).first;
      a.incref(code);  // kept: see above
    }
    const int line = a.frame_line(frame);
    void*& word = (*g_frames)[{code, line}];
    if (!word) word = word_for_text(it->second.file, it->second.function, line);
    return word;
  } catch (...) {
    return nullptr;
  }
}

// This thread's last frames: (code, instruction offset) -> tagged word, direct-mapped. An entry
// names a code object g_codes keeps, so its address cannot be reused meanwhile.
struct Recent {
  const Obj* code;
  int lasti;
  void* word;
};
constexpr int kRecent = 64;
__thread Recent t_recent[kRecent];

// Frames read through the interpreter's structs (RawFrames), for calls made without the GIL: only
// once a walk holding the GIL read the same frames through them as the C API did (Verified).
// Until then every read is checked (process_vm_readv on this process: an address that is not
// mapped fails the read instead of faulting), so wrong offsets cost no crash, only the frames.
enum RawCheck : int { kUnchecked, kVerified, kRefused };
std::atomic<int> g_raw{kUnchecked};
std::atomic<bool> g_released_unread{false};  // a call without the GIL got no frames for want of it

bool peek(std::uintptr_t address, void* out, std::size_t size, bool checked) noexcept {
  if (!address) return false;
  if (!checked) {
    std::memcpy(out, reinterpret_cast<const void*>(address), size);
    return true;
  }
  iovec local{out, size}, remote{reinterpret_cast<void*>(address), size};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}
template <typename T>
bool peek(std::uintptr_t address, T* out, bool checked) noexcept {
  return peek(address, out, sizeof *out, checked);
}

// A str object's text, if it is a compact ASCII one (faulthandler's _Py_DumpASCII reads the same):
// its characters follow the PyASCIIObject. False for anything else (the frame is then not read).
bool ascii_text(const Api& a, std::uintptr_t str, bool checked, char* out, std::size_t size) noexcept {
  const RawFrames& f = *a.raw;
  std::uintptr_t type = 0;
  std::intptr_t length = 0;
  unsigned state = 0;
  if (!peek(str + f.ob_type, &type, checked) || type != reinterpret_cast<std::uintptr_t>(a.str_type) ||
      !peek(str + f.ascii_length, &length, checked) || !peek(str + f.ascii_state, &state, checked))
    return false;
  constexpr unsigned kCompact = 1u << 5, kAscii = 1u << 6;  // after interned:2, kind:3 (3.11 to 3.14)
  if ((state & (kCompact | kAscii)) != (kCompact | kAscii) || length < 0 || static_cast<std::size_t>(length) >= size)
    return false;
  if (!peek(str + f.ascii_size, out, static_cast<std::size_t>(length), checked)) return false;
  out[length] = '\0';
  return true;
}

// How a raw walk ended.
enum class RawEnd { Done, Unreadable, Broken };

// This thread's frames from its thread state `tstate`, innermost first, at most `max`.
RawEnd raw_capture(const Api& a, std::uintptr_t tstate, void** out, int max, bool checked, int* count) noexcept {
  const RawFrames& f = *a.raw;
  *count = 0;
  std::uintptr_t frame = 0;
  if (!peek(tstate + f.tstate_frame, &frame, checked)) return RawEnd::Broken;
  if (f.cframe_frame != RawFrames::kNone && frame && !peek(frame + f.cframe_frame, &frame, checked))
    return RawEnd::Broken;
  for (int seen = 0; frame && *count < max; ++seen) {
    if (seen > 4096) return RawEnd::Broken;  // (a cycle: never in a real stack)
    unsigned char owner = 0;
    std::uintptr_t code = 0, instr = 0, type = 0, file = 0, function = 0, previous = 0;
    if (!peek(frame + f.frame_owner, &owner, checked) || !peek(frame + f.frame_code, &code, checked) ||
        !peek(frame + f.frame_previous, &previous, checked))
      return RawEnd::Broken;
    code &= ~static_cast<std::uintptr_t>(7);  // (3.14's _PyStackRef tag bits)
    if (owner < f.first_foreign_owner && code) {
      if (!peek(code + f.ob_type, &type, checked)) return RawEnd::Broken;
      if (type == reinterpret_cast<std::uintptr_t>(a.code_type)) {
        if (!peek(frame + f.frame_instr, &instr, checked) || !peek(code + f.code_filename, &file, checked) ||
            !peek(code + f.code_qualname, &function, checked))
          return RawEnd::Broken;
        char file_text[1024], function_text[256];
        if (!ascii_text(a, file, checked, file_text, sizeof file_text) ||
            !ascii_text(a, function, checked, function_text, sizeof function_text))
          return RawEnd::Unreadable;
        const std::intptr_t units =
            (static_cast<std::intptr_t>(instr) - static_cast<std::intptr_t>(code + f.code_code)) / 2;
        const int line = a.addr2line(reinterpret_cast<Obj*>(code), static_cast<int>(units * 2));
        try {
          std::lock_guard<std::mutex> lock(g_mu);
          out[(*count)++] = word_for_text(file_text, function_text, line);
        } catch (...) {
          return RawEnd::Unreadable;
        }
      }
    }
    frame = previous;
  }
  return RawEnd::Done;
}

// On a capture holding the GIL, while unchecked: whether the raw walk reads what the C API read
// (`api`, `n` frames). Equal: verified. A raw walk that stopped at a str it does not read (not
// ASCII) decides nothing if what it read agrees; anything else that differs refuses it for good.
void check_raw(const Api& a, void* tstate, void* const* api, int n) noexcept {
  if (!a.raw || n <= 0 || g_raw.load(std::memory_order_relaxed) != kUnchecked) return;
  void* raw[64];
  int m = 0;
  const RawEnd end = raw_capture(a, reinterpret_cast<std::uintptr_t>(tstate), raw, n < 64 ? n : 64, true, &m);
  const int want = n < 64 ? n : 64;
  bool same = end != RawEnd::Broken && (m == want || (end == RawEnd::Unreadable && m < want));
  for (int i = 0; same && i < m; ++i) same = raw[i] == api[i];
  if (!same) g_raw.store(kRefused);
  else if (m == want) g_raw.store(kVerified);
}

// This thread's frames while it has released the GIL (0 if they are not read).
int capture_released(const Api& a, void** out, int max) noexcept {
  if (!a.is_initialized()) return 0;
  void* tstate = a.own_thread_state ? a.own_thread_state() : nullptr;  // (null: a thread Python never ran on)
  if (!tstate) return 0;
  if (!a.raw || g_raw.load(std::memory_order_acquire) != kVerified) {
    g_released_unread.store(true, std::memory_order_relaxed);
    return 0;
  }
  int n = 0;
  raw_capture(a, reinterpret_cast<std::uintptr_t>(tstate), out, max, false, &n);
  return n;
}
}  // namespace

const Interpreter* g_interpreter = nullptr;

void init() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("ATTRCHECK_PYTHON_FRAMES");
    if (env && !std::strcmp(env, "0")) return;
    if (resolve(g_api)) g_interpreter = reinterpret_cast<const Interpreter*>(&g_api);
    // The row for calls without the GIL is checked at once where MPI is started holding it
    // (mpi4py does, importing its MPI module): a program whose attribute calls all release it
    // (Comm.Dup) then has their frames from the first.
    if (g_interpreter && g_api.raw && held_state(g_api)) {
      void* frames[64];
      capture(frames, 64);
    }
  });
}

const char* version() noexcept { return g_interpreter ? g_version : ""; }

bool released_unread(char* why, std::size_t size) noexcept {
  if (!g_interpreter || !g_released_unread.load(std::memory_order_relaxed)) return false;
  const char* reason = !g_api.raw ? "python_profile.hpp has no RawFrames row for it"
                       : g_raw.load() == kRefused
                           ? "its RawFrames row did not read the frames the C API read, and is not used"
                           : "no call holding the GIL has yet checked its RawFrames row";
  std::snprintf(why, size, "%s", reason);
  return true;
}

const char* unread_version() noexcept { return g_interpreter ? "" : g_unread; }

const char* read_versions() noexcept {
  struct List {
    char text[8 * (sizeof kPythonVersions / sizeof kPythonVersions[0]) + 1] = "";
  };
  static const List list = [] {
    List l;
    std::size_t n = 0;
    for (const PythonVersion& v : kPythonVersions)
      n += static_cast<std::size_t>(std::snprintf(l.text + n, sizeof l.text - n, "%s%d.%d", n ? ", " : "", v.major, v.minor));
    return l;
  }();
  return list.text;
}

int capture(void** out, int max) noexcept {
  if (!g_interpreter || max <= 0) return 0;
  const Api& a = g_api;
  void* state = held_state(a);
  if (!state) return capture_released(a, out, max);
  // The thread's exception, if one is set, is put back as it was; anything our calls might set (a
  // frame object not made for want of memory: the only way they fail) is cleared.
  Obj *type = nullptr, *value = nullptr, *traceback = nullptr;
  const bool raised = a.err_occurred() != nullptr;
  if (raised) a.err_fetch(&type, &value, &traceback);
  const int collecting = a.gc_disable();  // python_profile.hpp: frame objects made may collect
  int n = 0;
  for (Obj* frame = a.get_frame(state); frame;) {
    if (n < max) {
      Obj* code = a.frame_code(frame);
      const int lasti = a.frame_lasti(frame);
      const auto h = (reinterpret_cast<std::uintptr_t>(code) ^ (static_cast<std::uintptr_t>(lasti) << 20)) *
                     0x9E3779B97F4A7C15ULL;
      Recent& r = t_recent[h >> 58];
      static_assert(kRecent == 64, "the top 6 bits pick the entry");
      void* word = r.code == code && r.lasti == lasti ? r.word : nullptr;
      if (!word && code && (word = word_of(a, frame, code))) r = Recent{code, lasti, word};
      if (code) a.decref(code);
      if (word) out[n++] = word;
    }
    Obj* back = n < max ? a.frame_back(frame) : nullptr;
    a.decref(frame);
    frame = back;
  }
  if (collecting) a.gc_enable();
  if (raised) a.err_restore(type, value, traceback);
  else if (a.err_occurred()) a.err_clear();
  check_raw(a, state, out, n);
  return n;
}

namespace {

// Whether `fn` is in mpi4py's MPI extension module (.../mpi4py/MPI.cpython-*.so, MPI.abi3.so ...).
bool in_mpi4py(const void* fn) noexcept {
  Dl_info dl{};
  return fn && dladdr(fn, &dl) && dl.dli_fname && std::strstr(dl.dli_fname, "/mpi4py/MPI.");
}

// Whether the mpi4py the program imported passes its keyval state (_p_keyval) as its callbacks'
// extra_state: 3.1 on.
bool mpi4py_passes_state(const Api& a) {
  Obj* modules = a.sys_object("modules");
  Obj* mpi4py = modules ? a.dict_item(modules, "mpi4py") : nullptr;
  const std::string version = text_of(a, mpi4py, "__version__");
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major > 3 || (major == 3 && minor >= 1);
}

// The Python function `callable` runs (a function, or a bound method's): its code object, a new
// reference, or null.
Obj* code_of(const Api& a, Obj* callable) {
  Obj* code = a.getattr(callable, "__code__");
  if (code) return code;
  a.err_clear();
  Obj* function = a.getattr(callable, "__func__");
  if (!function) {
    a.err_clear();
    return nullptr;
  }
  code = a.getattr(function, "__code__");
  if (!code) a.err_clear();
  a.decref(function);
  return code;
}

}  // namespace

bool mpi4py_callback(const void* fn, const void* extra_state, bool copy, void** function, void** frames, int max,
                     int* depth) noexcept {
  *function = nullptr;
  *depth = 0;
  if (!g_interpreter || !g_api.callbacks || !extra_state || !in_mpi4py(fn)) return false;
  const Api& a = g_api;
  if (!a.is_initialized()) return false;
  const int gil = a.gil_ensure();
  Obj *type = nullptr, *value = nullptr, *traceback = nullptr;
  const bool raised = a.err_occurred() != nullptr;
  if (raised) a.err_fetch(&type, &value, &traceback);
  bool ok = false;
  try {
    Obj* state = static_cast<Obj*>(const_cast<void*>(extra_state));
    Obj* cls = mpi4py_passes_state(a) ? a.getattr(state, "__class__") : nullptr;
    if (!cls) a.err_clear();
    ok = cls && text_of(a, cls, "__name__") == "_p_keyval";
    if (cls) a.decref(cls);
    Obj* callable = ok ? a.getattr(state, copy ? "copy_fn" : "delete_fn") : nullptr;
    if (ok && !callable) a.err_clear();
    if (Obj* code = callable ? code_of(a, callable) : nullptr) {
      const CodeText text = code_text(a, code);
      long line = 0;
      if (Obj* first = a.getattr(code, "co_firstlineno")) {
        line = a.as_long(first);
        a.decref(first);
      }
      if (!text.file.empty() && line > 0) {
        const int first_line = static_cast<int>(line);
        *function = python_frame_word(python_frame_add(text.file.c_str(), text.function.c_str(), first_line));
      }
      a.decref(code);
    }
    if (callable) a.decref(callable);
  } catch (...) {  // (memory, in the frame table)
  }
  // The thread's own frames, the GIL now held: the Python code that made the call running the
  // callback (a thread's frames stay in its thread state while it has released the GIL).
  if (ok) *depth = capture(frames, max);
  if (raised) a.err_restore(type, value, traceback);
  else if (a.err_occurred()) a.err_clear();
  a.gil_release(gil);
  return ok;
}

}  // namespace attrcheck::rt::python
