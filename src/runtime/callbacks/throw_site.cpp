// Where a C++ exception that escapes a user callback was thrown (see throw_site.hpp).
#include "runtime/callbacks/throw_site.hpp"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "attrcheck/provenance.hpp"
#include "report/report.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {
namespace {

__thread void* t_throw_frames[kMaxStackDepth];

using CxaThrow = void (*)(void*, std::type_info*, void (*)(void*));

CxaThrow real_cxa_throw() noexcept {
  static const CxaThrow fn = reinterpret_cast<CxaThrow>(dlsym(RTLD_NEXT, "__cxa_throw"));
  return fn;
}

}  // namespace

const void* const* throw_site_frames(int* depth) noexcept {
  *depth = t_state.ctx.throw_depth;
  return t_state.ctx.throw_depth > 0 ? t_throw_frames : nullptr;
}

// Record the throw: only while one of the program's callbacks runs under attrcheck on this thread.
__attribute__((noinline)) void record_throw() noexcept {
  if (!t_state.ctx.cb_top) return;
  const int want = state().findings.stack_depth();
  t_state.ctx.throw_depth = want > 0 ? capture_stack(t_throw_frames, want < kMaxStackDepth ? want : kMaxStackDepth, 2) : 0;
}

void describe_current_exception(char* buf, std::size_t size) noexcept {
  const std::type_info* type = abi::__cxa_current_exception_type();
  const char* what = nullptr;
  try {
    throw;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  int status = -1;
  char* demangled = type ? abi::__cxa_demangle(type->name(), nullptr, nullptr, &status) : nullptr;
  const char* name = status == 0 && demangled ? demangled : type ? type->name() : "an unknown type";
  Appender a{buf, size};
  a.put(name);
  if (what) {
    char clipped[96];
    copy_str(clipped, sizeof clipped, what);
    a.put(" (\"");
    a.put(clipped);
    a.put("\")");
  }
  std::free(demangled);
}

}  // namespace attrcheck::rt

// The C++ ABI's throw entry point, interposed (LD_PRELOAD, or libattrcheck linked ahead of
// libstdc++): note the throwing stack, then throw as the library would. (Defined where <cxxabi.h>
// declares it, with its exact signature.)
namespace __cxxabiv1 {
extern "C" __attribute__((visibility("default"))) void __cxa_throw(void* object, std::type_info* type,
                                                                   void (_GLIBCXX_CDTOR_CALLABI* destroy)(void*)) {
  attrcheck::rt::record_throw();
  const attrcheck::rt::CxaThrow real = attrcheck::rt::real_cxa_throw();
  if (!real) std::abort();  // no libstdc++ below us: cannot happen in a process that throws
  real(object, type, destroy);
  __builtin_unreachable();
}
}  // namespace __cxxabiv1
