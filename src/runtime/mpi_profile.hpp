// The MPI library attrcheck is built against, as one profile (the entries are in
// mpi_profile.def): its predefined-callback encoding, whether its Fortran bindings enter through
// the C ones, and the ways it is known to depart from the standard. Hooks and the cross-check ask
// this header; nothing else in the runtime tests which library it runs on.
#pragma once

#include <atomic>
#include <cstdint>

#include <mpi.h>

#include "attrcheck/engine.hpp"

namespace attrcheck::rt {

#define LIBRARY(Enum, ...) Enum,
#define DIVERGENCE(...)
#define ERROR_CLASS(...)
enum class Library : unsigned char {
#include "runtime/mpi_profile.def"
  Unknown
};
#undef LIBRARY

struct MpiProfile {
  Library library;
  const char* id;      // "openmpi", "mpich": what the test harness and the docs call it
  const char* name;    // "Open MPI"
  const char* marker;  // what MPI_Get_library_version says for it
  bool null_callbacks_are_null;
  bool fortran_enters_through_c;
  int fortran_predefined_key_offset;
  const char* exit_without_finalize;  // the launcher's status when a rank exits without MPI_Finalize
  const char* f08_profiling_prefix;   // "pmpi_": the use mpi_f08 bindings' profiling twins
};

// Selected at build time from mpi.h.
#if defined(OPEN_MPI)
inline constexpr Library kBuiltLibrary = Library::OpenMpi;
#elif defined(MPICH_VERSION)
inline constexpr Library kBuiltLibrary = Library::Mpich;
#else
inline constexpr Library kBuiltLibrary = Library::Unknown;
#endif

#define LIBRARY(Enum, id, name, marker, null_fns, through_c, fortran_key_offset, exit_status, f08_prefix) \
  {Library::Enum, id, name, marker, null_fns, through_c, fortran_key_offset, exit_status, f08_prefix},
inline constexpr MpiProfile kProfiles[] = {
#include "runtime/mpi_profile.def"
    {Library::Unknown, "unknown", "an unknown MPI library", "", false, false, 0, "nonzero", "pmpi_"},
};
#undef LIBRARY
#undef DIVERGENCE
#undef ERROR_CLASS

inline constexpr const MpiProfile& profile_of(Library l) {
  for (const MpiProfile& p : kProfiles)
    if (p.library == l) return p;
  return kProfiles[sizeof kProfiles / sizeof kProfiles[0] - 1];
}
// The profile of the library attrcheck is built against (a compile-time constant: tests of its
// flags cost nothing on hot paths).
inline constexpr const MpiProfile& kProfile = profile_of(kBuiltLibrary);

// The library's `use mpi_f08` profiling entry point for `stem` ("comm_set_attr_f08_"): the
// profile's prefix + stem, looked up at first use (libmpi_usempif08 / libmpifort is loaded only by
// Fortran programs). nullptr if absent.
void* f08_pmpi(const char* stem) noexcept;
// An extension's (MPIX_): "comm_shrink_f08_" -> pmpix_comm_shrink_f08_ / pmpixr_comm_shrink_f08_.
void* f08_pmpix(const char* stem) noexcept;

// A keyval as a Fortran program passes it, as the C checks know it: the predefined keys' Fortran
// numbers mapped to the C ones (fortran_predefined_key_offset), others unchanged.
inline int c_keyval(int fortran_key) noexcept {
  if constexpr (kProfile.fortran_predefined_key_offset == 0) {
    return fortran_key;
  } else {
    static constexpr int kPredefined[] = {MPI_TAG_UB, MPI_HOST, MPI_IO, MPI_WTIME_IS_GLOBAL, MPI_APPNUM,
                                          MPI_UNIVERSE_SIZE, MPI_LASTUSEDCODE, MPI_WIN_BASE, MPI_WIN_SIZE,
                                          MPI_WIN_DISP_UNIT, MPI_WIN_CREATE_FLAVOR, MPI_WIN_MODEL};
    for (const int k : kPredefined)
      if (fortran_key == k + kProfile.fortran_predefined_key_offset) return k;
    return fortran_key;
  }
}

// Where the shadow cross-check sees a divergence.
enum class DivergenceSite : unsigned char {
  CopiesAttributes,  // a constructor that must not copy attributes did
  ExtraCallback,     // the library ran a callback the standard does not call there
  MissingCallback,   // the library did not run a callback the standard requires
  SelfDeleteOrder,   // MPI_Finalize ran MPI_COMM_SELF's delete callbacks out of order
  ResultDiffers,     // the library succeeded where the standard's model failed on a callback
  DroppedAttribute,  // a call that failed on a delete callback dropped the attribute anyway
  WrongHandle,       // the library passed a callback another object's handle
  Unclassified,      // anything else (values, answers): never a known divergence
};

struct KnownDivergence {
  Library library;
  const char* id;
  DivergenceSite site;
  const char* call;
  const char* versions;   // the library versions it was seen in
  const char* behaviour;  // what the library does
  const char* standard;   // what the standard says (where)
};

// The built library's known divergence for a difference seen at `site` during `call` (a
// divergence whose call is "*" is seen during any call), or nullptr (then it is a divergence nobody has recorded: reported all the same).
const KnownDivergence* known_divergence(DivergenceSite site, const char* call) noexcept;
// Whether the library passes Fortran delete callbacks the object's own handle (no WrongHandle
// divergence in its profile): where it does not, such a callback's handle says nothing.
inline bool fortran_delete_handles_trusted() noexcept {
  static const bool trusted = !known_divergence(DivergenceSite::WrongHandle, "");
  return trusted;
}

// Checks, once MPI runs, that MPI_Get_library_version names the library attrcheck was built
// against; warns on stderr if not (the wrappers' constants would be another library's).
void check_library(const char* version) noexcept;
// The library's version as MPI_Get_library_version gave it to check_library ("4.1.4"), or "" before.
const char* library_version() noexcept;

// The predefined callbacks (MPI_COMM_NULL_COPY_FN ...), recognised by address.
struct PredefinedFn {
  bool copy;
  int action;              // CopyAction / DeleteAction
  const char* name;
  const char* deprecated;  // the MPI-1 ones: the kind-specific replacement; else nullptr
};
// find_predefined_fn's compare with each candidate address (mpi_profile.cpp), reached only past
// its range check. Its first call also sets the bounds that check reads.
const PredefinedFn* scan_predefined_fn(const void* fn, bool copy, ObjectKind kind, Binding lang) noexcept;

// Whether a null copy or delete callback is legal (the predefined null one) in binding `lang`.
inline constexpr bool null_callback_is_predefined(Binding lang) noexcept {
  return kProfile.null_callbacks_are_null && lang == Binding::C;
}

// The lowest and highest non-null address of the predefined callbacks, [fortran][copy]
// (mpi_profile.cpp), set by scan_predefined_fn's first call: until then 0 and UINTPTR_MAX, which
// send every callback to it. (Any mix of those and the real bounds is right: each bound only ever
// narrows to the real one, and the scan alone gives the same answer.)
extern std::atomic<std::uintptr_t> g_predefined_fn_lo[2][2], g_predefined_fn_hi[2][2];

// What `fn`, passed as a keyval's copy (`copy`) or delete callback in binding `lang`, is: a
// predefined callback, or nullptr for a user function. Where the library's encoding cannot tell a
// deprecated constant from its replacement (MPICH's C constants), the replacement is assumed.
// A user function (outside the bounds) is told apart inline: a keyval create asks for both its
// callbacks.
inline const PredefinedFn* find_predefined_fn(const void* fn, bool copy, ObjectKind kind, Binding lang) noexcept {
  if (fn) {
    const auto v = reinterpret_cast<std::uintptr_t>(fn);
    const bool fortran = lang != Binding::C;
    if (v < g_predefined_fn_lo[fortran][copy].load(std::memory_order_relaxed) ||
        v > g_predefined_fn_hi[fortran][copy].load(std::memory_order_relaxed))
      return nullptr;
  } else if (!null_callback_is_predefined(lang)) {
    return nullptr;
  }
  return scan_predefined_fn(fn, copy, kind, lang);
}

}  // namespace attrcheck::rt
