// The library profile: the known divergences' table, the run-time check of the library, and the
// predefined callbacks by address.
#include "runtime/mpi_profile.hpp"

#include <cstdio>
#include <cstring>
#include <strings.h>

#include "runtime/hooks.hpp"

namespace attrcheck::rt {

namespace {

#define LIBRARY(...)
#define ERROR_CLASS(...)
#define DIVERGENCE(Lib, id, Site, call, versions, behaviour, standard) \
  {Library::Lib, id, DivergenceSite::Site, call, versions, behaviour, standard},
constexpr KnownDivergence kDivergences[] = {
#include "runtime/mpi_profile.def"
};
#undef LIBRARY
#undef ERROR_CLASS
#undef DIVERGENCE

}  // namespace

const KnownDivergence* known_divergence(DivergenceSite site, const char* call) noexcept {
  for (const KnownDivergence& d : kDivergences)
    if (d.library == kBuiltLibrary && d.site == site && call && !strcasecmp(d.call, call)) return &d;  // (Fortran: MPI_COMM_FREE)
  return nullptr;
}

void check_library(const char* version) noexcept {
  if (!version || !*kProfile.marker || std::strstr(version, kProfile.marker)) return;
  // MPICH's derivatives (Intel MPI, MVAPICH, Cray MPICH) name themselves; their mpi.h says MPICH.
  std::fprintf(stderr,
               "attrcheck: warning: built against %s, but the MPI library in use is \"%s\"; the checks assume %s's "
               "behaviour\n",
               kProfile.name, version, kProfile.name);
}

const PredefinedFn* find_predefined_fn(const void* fn, bool copy, ObjectKind kind, Binding lang) noexcept {
  static const char* const null_copy[] = {"MPI_COMM_NULL_COPY_FN", "MPI_TYPE_NULL_COPY_FN", "MPI_WIN_NULL_COPY_FN"};
  static const char* const dup[] = {"MPI_COMM_DUP_FN", "MPI_TYPE_DUP_FN", "MPI_WIN_DUP_FN"};
  static const char* const null_delete[] = {"MPI_COMM_NULL_DELETE_FN", "MPI_TYPE_NULL_DELETE_FN", "MPI_WIN_NULL_DELETE_FN"};
  constexpr int kNullCopy = int(CopyAction::NullCopy), kDup = int(CopyAction::Dup);
  constexpr int kNullDelete = int(DeleteAction::NullDelete);
  struct Entry {
    const void* fn;       // the C function (a null pointer in MPICH for the null ones)
    const char* fortran;  // the Fortran one's symbol
    PredefinedFn what;
  };
  // The kind-specific names first: where addresses coincide (MPICH's C constants: MPI_DUP_FN is
  // MPI_COMM_DUP_FN, every null one is 0) the first match wins, so nothing is called deprecated
  // that cannot be told apart.
  static const Entry table[] = {
      {reinterpret_cast<const void*>(MPI_COMM_NULL_COPY_FN), "mpi_comm_null_copy_fn_", {true, kNullCopy, "MPI_COMM_NULL_COPY_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_COMM_DUP_FN), "mpi_comm_dup_fn_", {true, kDup, "MPI_COMM_DUP_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_TYPE_NULL_COPY_FN), "mpi_type_null_copy_fn_", {true, kNullCopy, "MPI_TYPE_NULL_COPY_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_TYPE_DUP_FN), "mpi_type_dup_fn_", {true, kDup, "MPI_TYPE_DUP_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_WIN_NULL_COPY_FN), "mpi_win_null_copy_fn_", {true, kNullCopy, "MPI_WIN_NULL_COPY_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_WIN_DUP_FN), "mpi_win_dup_fn_", {true, kDup, "MPI_WIN_DUP_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_NULL_COPY_FN), "mpi_null_copy_fn_", {true, kNullCopy, "MPI_NULL_COPY_FN", "copy"}},
      {reinterpret_cast<const void*>(MPI_DUP_FN), "mpi_dup_fn_", {true, kDup, "MPI_DUP_FN", "dup"}},
      {reinterpret_cast<const void*>(MPI_COMM_NULL_DELETE_FN), "mpi_comm_null_delete_fn_", {false, kNullDelete, "MPI_COMM_NULL_DELETE_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_TYPE_NULL_DELETE_FN), "mpi_type_null_delete_fn_", {false, kNullDelete, "MPI_TYPE_NULL_DELETE_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_WIN_NULL_DELETE_FN), "mpi_win_null_delete_fn_", {false, kNullDelete, "MPI_WIN_NULL_DELETE_FN", nullptr}},
      {reinterpret_cast<const void*>(MPI_NULL_DELETE_FN), "mpi_null_delete_fn_", {false, kNullDelete, "MPI_NULL_DELETE_FN", "delete"}},
  };
  constexpr std::size_t kEntries = sizeof table / sizeof table[0];
  // The addresses to compare with, C's then Fortran's (real functions in both libraries, distinct
  // in MPICH too, found by name), built once: a lookup is then one compare per candidate (the
  // copy entries come first, then the delete ones), ~150 -> ~40 instructions for a user function.
  static const void* const* addresses = [] {
    static const void* both[2][kEntries];
    for (std::size_t i = 0; i < kEntries; ++i) {
      both[0][i] = table[i].fn;
      both[1][i] = fortran_pmpi(table[i].fortran);
    }
    return &both[0][0];
  }();
  constexpr std::size_t kFirstDelete = 8;
  static_assert(kEntries == 12, "copy entries [0, kFirstDelete), delete entries after");
  static thread_local PredefinedFn hit;
  if (!fn && !null_callback_is_predefined(lang)) return nullptr;
  const int k = static_cast<int>(kind);
  const void* const* candidates = addresses + (lang == Binding::C ? 0 : kEntries);
  for (std::size_t i = copy ? 0 : kFirstDelete, end = copy ? kFirstDelete : kEntries; i < end; ++i) {
    if (candidates[i] != fn) continue;
    const PredefinedFn& p = table[i].what;
    hit = p;
    if (p.deprecated)  // the replacement for this object kind
      hit.deprecated = p.copy ? (p.action == kDup ? dup[k] : null_copy[k]) : null_delete[k];
    return &hit;
  }
  return nullptr;
}

}  // namespace attrcheck::rt
