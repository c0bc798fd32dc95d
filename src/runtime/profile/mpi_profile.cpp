// The built library's profile at run time: the release series chosen from the library's version,
// what it does where that matters (ReleaseFacts), its known divergences, the run-time check of the
// library, and the predefined callbacks by address. (The tables themselves: mpi_profile_table.hpp.)
#include "runtime/profile/mpi_profile.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <strings.h>

#include "runtime/process/library.hpp"  // fortran_pmpi

namespace attrcheck::rt {

namespace {

ReleaseFacts facts_of(const ReleaseProfile& r) noexcept {
  return {!release_has(r, "fortran-delete-callback-wrong-handle"), release_has(r, "world-attributes-deleted-at-finalize")};
}

char g_library_version[32] = "";
std::atomic<Library> g_running{kBuiltLibrary};  // the standard ABI build: set by check_library
std::atomic<const ReleaseProfile*> g_release{nullptr};  // set by check_library

}  // namespace

static_assert([] {
  for (std::size_t i = 0; i < sizeof kReleases / sizeof kReleases[0]; ++i)
    if (static_cast<std::size_t>(kReleases[i].release) != i) return false;
  return true;
}(), "kReleases is indexed by Release");

bool release_probed() noexcept {
  // The same major.minor as the probed release.
  const char* a = g_library_version;
  const char* b = release().probed;
  for (int dots = 0; *a && *a == *b; ++a, ++b)
    if (*a == '.' && ++dots == 2) return true;
  return (!*a || *a == '.') && (!*b || *b == '.') && *g_library_version;
}

const ReleaseProfile& release() noexcept {
  const ReleaseProfile* r = g_release.load(std::memory_order_acquire);
  return r ? *r : release_for(running_library(), "");
}

const ReleaseFacts& release_facts() noexcept {
  constexpr std::size_t kCount = sizeof kReleases / sizeof kReleases[0];
  static const struct Table {
    ReleaseFacts facts[kCount];
    Table() noexcept {
      for (std::size_t i = 0; i < kCount; ++i) facts[i] = facts_of(kReleases[i]);
    }
  } table;
  return table.facts[static_cast<std::size_t>(release().release)];
}

bool call_listed(const char* listed, const char* call) noexcept {
  if (!std::strcmp(listed, "*")) return true;
  const std::size_t n = std::strlen(call);
  for (const char* p = listed;;) {
    const char* end = std::strchr(p, '|');
    const std::size_t len = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
    if (len == n && !strncasecmp(p, call, n)) return true;
    if (!end) return false;
    p = end + 1;
  }
}

const KnownDivergence* known_divergence(DivergenceSite site, const char* call) noexcept {
  for (const KnownDivergence& d : kDivergences)
    if (d.site == site && call && call_listed(d.call, call) && release_has(release(), d.id))
      return &d;  // (Fortran: MPI_COMM_FREE)
  return nullptr;
}

const char* library_error_class(const char* situation) noexcept { return error_class_of(release(), situation); }

const char* library_version() noexcept { return g_library_version; }

Library running_library() noexcept { return g_running.load(std::memory_order_relaxed); }

const char* running_library_name() noexcept {
  if constexpr (!kStandardAbi) return kProfile.name;
  switch (running_library()) {
    case Library::OpenMpi: return "Open MPI (the MPI standard ABI)";
    case Library::Mpich: return "MPICH (the MPI standard ABI)";
    default: return "an MPI library of the standard ABI";
  }
}

void check_library(const char* version) noexcept {
  // The first dotted number: "Open MPI v4.1.4, package: ...", "MPICH Version:\t4.0.2 ...".
  for (const char* p = version; p && *p; ++p) {
    if (*p < '0' || *p > '9') continue;
    std::size_t n = 0;
    while (n + 1 < sizeof g_library_version && ((p[n] >= '0' && p[n] <= '9') || p[n] == '.')) {
      g_library_version[n] = p[n];
      ++n;
    }
    g_library_version[n] = '\0';
    break;
  }
  if constexpr (kStandardAbi) {
    // Which library is underneath: the one whose marker the version names (MPICH's derivatives
    // name themselves and say MPICH too).
    for (const MpiProfile& p : kProfiles)
      if (*p.marker && version && std::strstr(version, p.marker)) {
        g_running.store(p.library, std::memory_order_relaxed);
        break;
      }
  }
  g_release.store(&release_for(running_library(), g_library_version), std::memory_order_release);
  if constexpr (kStandardAbi) {
    if (running_library() != Library::Unknown || !version) return;
    std::fprintf(stderr,
                 "attrcheck: warning: the MPI library of the standard ABI in use is \"%s\", which attrcheck has no "
                 "profile of; the checks assume the standard's behaviour\n",
                 version);
    return;
  }
  if (!version || !*kProfile.marker || std::strstr(version, kProfile.marker)) return;
  // MPICH's derivatives (Intel MPI, MVAPICH, Cray MPICH) name themselves; their mpi.h says MPICH.
  std::fprintf(stderr,
               "attrcheck: warning: built against %s, but the MPI library in use is \"%s\"; the checks assume %s's "
               "behaviour\n",
               kProfile.name, version, kProfile.name);
}

void* f08_pmpi(const char* stem) noexcept {
  char name[96];
  const std::size_t prefix = std::strlen(kProfile.f08_profiling_prefix), length = std::strlen(stem);
  if (prefix + length >= sizeof name) return nullptr;
  std::memcpy(name, kProfile.f08_profiling_prefix, prefix);
  std::memcpy(name + prefix, stem, length + 1);
  return fortran_pmpi(name);
}

void* f08_pmpix(const char* stem) noexcept {
  // The prefix with the extension's x after "pmpi": pmpi_ -> pmpix_, pmpir_ -> pmpixr_.
  char name[96];
  const char* const p = kProfile.f08_profiling_prefix;
  const std::size_t prefix = std::strlen(p), length = std::strlen(stem);
  if (prefix < 4 || prefix + 1 + length >= sizeof name) return nullptr;
  std::memcpy(name, p, 4);
  name[4] = 'x';
  std::memcpy(name + 5, p + 4, prefix - 4);
  std::memcpy(name + prefix + 1, stem, length + 1);
  return fortran_pmpi(name);
}

std::atomic<std::uintptr_t> g_predefined_fn_lo[2][2] = {}, g_predefined_fn_hi[2][2] = {{UINTPTR_MAX, UINTPTR_MAX},
                                                                                  {UINTPTR_MAX, UINTPTR_MAX}};

const PredefinedFn* scan_predefined_fn(const void* fn, bool copy, ObjectKind kind, Binding lang) noexcept {
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
  // `use mpi_f08`'s are module procedures of mpi_f08_callbacks (gfortran's mangling; no MPI-1
  // ones there), distinct from mpif.h's in both libraries.
  static const char* const f08_prefix = "__mpi_f08_callbacks_MOD_";
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
  // The addresses to compare with, built once: C's, mpif.h's and `use mpi_f08`'s (Fortran's are
  // real functions in both libraries, distinct in MPICH too, found by name; f08 has no MPI-1 ones).
  // A lookup is then one compare per candidate (the copy entries first, then the delete ones).
  // Built with them: the lowest and highest non-null candidate address of each binding (C or
  // Fortran) and role (copy or delete), published in g_predefined_fn_lo / _hi for
  // find_predefined_fn's inline range check (mpi_profile.hpp), which tells a user's callback (in
  // the program, not in the MPI library) apart before it gets here.
  constexpr std::size_t kFirstDelete = 8;
  static_assert(kEntries == 12, "copy entries [0, kFirstDelete), delete entries after");
  struct Addresses {
    const void* rows[3][kEntries];
  };
  static const Addresses& known = *[] {
    static Addresses a;
    for (std::size_t i = 0; i < kEntries; ++i) {
      a.rows[0][i] = table[i].fn;
      a.rows[1][i] = fortran_pmpi(table[i].fortran);
      char f08[80];  // mpi_comm_dup_fn_ -> __mpi_f08_callbacks_MOD_mpi_comm_dup_fn
      std::snprintf(f08, sizeof f08, "%s%.*s", f08_prefix, static_cast<int>(std::strlen(table[i].fortran) - 1),
                    table[i].fortran);
      a.rows[2][i] = table[i].what.deprecated ? nullptr : fortran_pmpi(f08);
    }
    for (int fortran = 0; fortran < 2; ++fortran)
      for (int copies = 0; copies < 2; ++copies) {
        std::uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (std::size_t i = copies ? 0 : kFirstDelete, end = copies ? kFirstDelete : kEntries; i < end; ++i)
          for (int row = fortran; row <= 2 * fortran; ++row)
            if (const auto v = reinterpret_cast<std::uintptr_t>(a.rows[row][i])) {
              lo = v < lo ? v : lo;
              hi = v > hi ? v : hi;
            }
        g_predefined_fn_lo[fortran][copies].store(lo, std::memory_order_relaxed);
        g_predefined_fn_hi[fortran][copies].store(hi, std::memory_order_relaxed);
      }
    return &a;
  }();
  static thread_local PredefinedFn hit;
  const bool c = lang == Binding::C;
  const int k = static_cast<int>(kind);
  const void* const* candidates = known.rows[c ? 0 : 1];
  const void* const* f08 = known.rows[2];
  for (std::size_t i = copy ? 0 : kFirstDelete, end = copy ? kFirstDelete : kEntries; i < end; ++i) {
    if (candidates[i] != fn && (c || !fn || f08[i] != fn)) continue;
    const PredefinedFn& p = table[i].what;
    hit = p;
    if (p.deprecated)  // the replacement for this object kind
      hit.deprecated = p.copy ? (p.action == kDup ? dup[k] : null_copy[k]) : null_delete[k];
    return &hit;
  }
  return nullptr;
}

}  // namespace attrcheck::rt
