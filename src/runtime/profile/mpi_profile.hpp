// The MPI library attrcheck is built against, as one profile (the entries are in
// mpi_profile.def): its predefined-callback encoding and whether its Fortran bindings enter
// through the C ones (from mpi.h, at build time), and, per release series chosen at run time from
// MPI_Get_library_version, the ways it is known to depart from the standard and what it does
// where the standard is silent. Hooks and the cross-check ask this header; nothing else in the
// runtime tests which library it runs on.
#pragma once

#include <atomic>
#include <cstdint>

#include <mpi.h>

#include "attrcheck/engine.hpp"
#include "runtime/profile/mpi_profile_table.hpp"

namespace attrcheck::rt {

// Selected at build time from mpi.h. The standard ABI build (ATTRCHECK_STANDARD_ABI) is built for
// no library: the one underneath is recognised at MPI_Init (running_library).
#if defined(ATTRCHECK_STANDARD_ABI)
inline constexpr Library kBuiltLibrary = Library::Unknown;
#elif defined(OPEN_MPI)
inline constexpr Library kBuiltLibrary = Library::OpenMpi;
#elif defined(MPICH_VERSION)
inline constexpr Library kBuiltLibrary = Library::Mpich;
#else
inline constexpr Library kBuiltLibrary = Library::Unknown;
#endif

#if defined(ATTRCHECK_STANDARD_ABI)
// The standard ABI's own profile, what holds for every library under it: every null callback is
// the sentinel 0x0 (and every dup one 0x1), and there is no Fortran binding. What differs between
// the libraries underneath (their releases' divergences, error classes and behaviours) is the
// running library's (release()).
inline constexpr MpiProfile kAbiProfile = {Library::Unknown, "abi", "the MPI standard ABI", "", true, false, 0,
                                           "any", ""};
inline constexpr const MpiProfile& kProfile = kAbiProfile;
#else
// The profile of the library attrcheck is built against (a compile-time constant: tests of its
// flags cost nothing on hot paths).
inline constexpr const MpiProfile& kProfile = profile_of(kBuiltLibrary);
#endif

// The library attrcheck runs on: the built one, or in the standard ABI build the one
// MPI_Get_library_version named at MPI_Init (Library::Unknown before, or for another).
Library running_library() noexcept;
// Its name: "Open MPI", or "Open MPI (the MPI standard ABI)" in the standard ABI build.
const char* running_library_name() noexcept;

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

// The release series attrcheck runs on: chosen by check_library from the library's version at
// MPI_Init; before that, the oldest series of the built library.
const ReleaseProfile& release() noexcept;
// Whether the library's version is of the release series its profile was probed on (5.0.x for a
// series probed on 5.0.7); if not, the series is an assumption (5.1.0 taken as Open MPI 5.0).
bool release_probed() noexcept;
// The running release's known divergence for a difference seen at `site` during `call` (a
// divergence whose call is "*" is seen during any call), or nullptr (then it is a divergence
// nobody has recorded: reported all the same).
const KnownDivergence* known_divergence(DivergenceSite site, const char* call) noexcept;
// Whether `call` is one of a profile entry's calls `listed`: "*" (any), or calls separated by '|'
// (case aside: Fortran's MPI_COMM_FREE is MPI_Comm_free).
bool call_listed(const char* listed, const char* call) noexcept;

// The error class the running release returns itself in `situation` (its ERROR_CLASS entry:
// "MPI_ERR_OTHER", "abort" ...), or nullptr if its probe did not ask.
const char* library_error_class(const char* situation) noexcept;

// What the running release does, asked where it matters (set by check_library).
struct ReleaseFacts {
  // Fortran delete callbacks get the object's own handle (no fortran-delete-callback-wrong-handle):
  // where they do not, such a callback's handle says nothing.
  bool fortran_delete_handles_trusted;
  // MPI_Finalize deletes MPI_COMM_WORLD's attributes (world-attributes-deleted-at-finalize).
  bool world_attributes_deleted_at_finalize;
};
const ReleaseFacts& release_facts() noexcept;
inline bool fortran_delete_handles_trusted() noexcept { return release_facts().fortran_delete_handles_trusted; }

// Checks, once MPI runs, that MPI_Get_library_version names the library attrcheck was built
// against (warns on stderr if not: the wrappers' constants would be another library's), and
// chooses the release series from its version.
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
