// attrcheck in a chain of PMPI tools (chain.cpp). A tool loaded after attrcheck that defines an
// intercepted MPI_X receives the call from attrcheck's wrapper (the next MPI_X in load order, as
// attrcheck's own wrapper received it from the program); with none, the call goes to the
// library's PMPI_X, as it always did. A tool loaded before attrcheck that defines MPI_X gets the
// program's calls first: they reach attrcheck only if it passes them on by their MPI_ name.
// Not a public header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/process/call_counts.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

// One intercepted entry point, as the generated wrappers list it (kChainLinks): its name, its
// profiling twin's, where its wrapper's next hop is kept (nullptr: a Fortran entry point, whose
// wrapper finds the library's twin itself), and the family and binding its calls are counted in
// (family kCallFamilies: MPI_Init, MPI_Finalize, MPI_Abort, which are not counted).
struct ChainLink {
  const char* name;
  const char* pmpi;
  void** next;
  std::uint8_t family;
  std::uint8_t binding;
};
extern const ChainLink kChainLinks[];
extern const std::size_t kChainLinkCount;

// Some tool after attrcheck defines an intercepted MPI_X: forwarded calls then run under a chain
// frame (below). Set once, when the library is loaded.
[[gnu::visibility("hidden")]] extern bool g_chained;
// The function of a chain frame: a frame on cb_top whose fn is this is a call attrcheck is
// passing to the next tool, not a callback (a callback the library runs meanwhile pushes its own
// frame over it).
[[gnu::visibility("hidden")]] extern const char kChainFrame[];

// A call of an intercepted function that arrived while this thread's innermost frame is a call
// attrcheck itself passed on: the next tool (or one that aliases PMPI_X to its MPI_X wrapper)
// sent it back. Its hook passes it on unchecked (enter_slow: the frame sends the wrappers' inline
// paths there), and forward() gives it to the library: it is the same call.
inline bool rechained() noexcept {
  const CbFrame* top = t_state.ctx.cb_top;
  return top && top->fn == kChainFrame;
}

// The MPI library's own definition of a profiling entry point (`pmpi`, e.g. "PMPI_Comm_dup"), not
// whatever a tool defines under that name; `fallback` (the linked PMPI_X) where it cannot be found.
// attrcheck's own calls of intercepted functions go there, so no tool sees them.
void* library_symbol(const char* pmpi, void* fallback) noexcept;
template <typename F>
F library_fn(F fallback, const char* pmpi) noexcept {
  return reinterpret_cast<F>(library_symbol(pmpi, reinterpret_cast<void*>(fallback)));
}

// Passes a call on to the next hop `f` (the wrapped function's profiling twin is `Pmpi`, named
// `pmpi`): alone, a call of `f`; with a tool after attrcheck, under a chain frame, and a call sent
// back goes to the library's own PMPI_X.
template <auto Pmpi, typename F, typename... A>
[[gnu::noinline, gnu::cold]] int forward_chained(F f, const char* pmpi, A... a) {
  if (rechained()) {
    static const auto library = library_fn(Pmpi, pmpi);
    return library(a...);
  }
  CbFrame frame{kChainFrame, ~Handle{0}, t_state.ctx.call, t_state.ctx.cb_top, 0, ObjectKind::Comm, false, false};
  t_state.ctx.cb_top = &frame;
  const int rc = f(a...);
  t_state.ctx.cb_top = frame.outer;
  return rc;
}
template <auto Pmpi, typename F, typename... A>
[[gnu::always_inline]] inline int forward(F f, const char* pmpi, A... a) {
  if (__builtin_expect(!g_chained, 1)) return f(a...);
  return forward_chained<Pmpi>(f, pmpi, a...);
}

// The next hops of the keyval frees that shadow mode holds back and makes later (keyvals.cpp),
// among every C wrapper's (defined in the generated wrappers).
namespace chain {
[[gnu::visibility("hidden")]] extern decltype(&PMPI_Comm_free_keyval) next_MPI_Comm_free_keyval;
[[gnu::visibility("hidden")]] extern decltype(&PMPI_Type_free_keyval) next_MPI_Type_free_keyval;
[[gnu::visibility("hidden")]] extern decltype(&PMPI_Win_free_keyval) next_MPI_Win_free_keyval;
}  // namespace chain

// The standard ABI build's next hop of a function that the library in use does not define (Open
// MPI's libmpi_abi has none of the MPI-1 caching calls): a program calling it natively stops
// there, with the dynamic linker's "symbol lookup error" and exit status 127; it stops there under
// attrcheck too, saying so (absent_function), never reaching a null pointer.
[[noreturn]] void absent_function(const char* name) noexcept;
template <const char* Name, typename F>
struct Absent;
template <const char* Name, typename R, typename... A>
struct Absent<Name, R (*)(A...)> {
  [[noreturn]] static R call(A...) noexcept { absent_function(Name); }
};

// attrcheck's own call of the library's PMPI_X, e.g. ATTRCHECK_LIBRARY(PMPI_Comm_free)(&comm) (found
// at the first call from each place, after resolve_chain()).
#define ATTRCHECK_LIBRARY(fn)                                                  \
  ([]() noexcept {                                                             \
    static const auto library_fn_ = ::attrcheck::rt::library_fn(&fn, #fn);   \
    return library_fn_;                                                        \
  }())

// A Fortran (mpif.h / use mpi) wrapper's next hop: the next `name` (mpi_comm_dup_) in load order if
// a tool's (a module other than the one defining the library's `pmpi`), else the library's `pmpi`
// (pmpi_comm_dup_); nullptr if the library has neither.
void* fortran_next(const char* name, const char* pmpi) noexcept;

// Finds each intercepted function's next hop, and which modules loaded before attrcheck define
// intercepted functions (the library's constructor, before any wrapper runs).
void resolve_chain() noexcept;

// Whether a module loaded before attrcheck (a tool earlier in LD_PRELOAD, or the program itself)
// defines some of the keyval, attribute or object calls attrcheck checks: their calls reach it
// first, and whether it passes them on cannot be known (a tool that calls PMPI_X itself does
// not), so a model of the run would miss calls at random. Then the runtime checks nothing (every
// wrapper passes its call to the library) and bypassed() says why, in `detail` ("libfoo.so,
// loaded before attrcheck, defines MPI_Comm_dup and 12 more ..."). A module in front that takes
// only MPI_Init, MPI_Finalize or MPI_Abort is no bypass: the run is adopted at its first call.
bool front_takes_calls() noexcept;
bool bypassed(char* detail, std::size_t size) noexcept;

// Whether the program runs on another MPI library than attrcheck is built for: a program of
// MPICH's with the Open MPI build, or one built for the MPI standard ABI (libmpi_abi.so.1) with a
// build for a library's own ABI. attrcheck's handles, constants and types are not that library's,
// so it cannot check, nor call the library itself. Looked for when attrcheck is loaded (the next
// PMPI_Get_library_version in the global scope) and at MPI_Init in every loaded module
// (`every_module`: a program may open its MPI library with dlopen, as Python does mpi4py); once
// found, every C wrapper's next hop is that library's PMPI_X, the caller passes every call there
// unchecked (mode off), and one line on stderr says what to use instead. True if found, now or
// before.
bool adopt_other_library(bool every_module) noexcept;
// What other_library found, in `detail`, for the report (tool.other-mpi); false if nothing.
bool other_library(char* detail, std::size_t size) noexcept;

}  // namespace attrcheck::rt

// Set (after every next hop points into that library) once adopt_other_library found one: the
// entries in assembly of a build whose handles are ints then jump to the next hop directly.
extern "C" {
[[gnu::visibility("hidden")]] extern bool attrcheck_other_library_calls;
}

// The exported entry MPI_X of such a build (gen/gen_wrappers.py: narrow_entry): a jump to its
// wrapper, attrcheck_impl_MPI_X, or to the next hop (`hop`, the mangled name of
// attrcheck::rt::chain::next_MPI_X) when the program runs on another library. Every register and
// the return address stay as the program set them, so a pointer handle of that library's reaches
// it whole. (endbr64 where the build marks its code for indirect-branch tracking; a no-op else.)
#if defined(__x86_64__)
#if defined(__CET__)
#define ATTRCHECK_ENTRY_LANDING "\tendbr64\n"
#else
#define ATTRCHECK_ENTRY_LANDING ""
#endif
#define ATTRCHECK_NARROW_ENTRY(name, hop)                                                         \
  asm(".text\n\t.globl " #name "\n\t.type " #name ", @function\n\t.p2align 4\n" #name ":\n"         \
      ATTRCHECK_ENTRY_LANDING "\tcmpb $0, attrcheck_other_library_calls(%rip)\n\tjne 1f\n"           \
      "\tjmp attrcheck_impl_" #name "\n1:\n\tjmp *" #hop "(%rip)\n\t.size " #name ", .-" #name "\n");
#else
#error "attrcheck's entries for a library whose handles are ints are written for x86-64 only"
#endif
