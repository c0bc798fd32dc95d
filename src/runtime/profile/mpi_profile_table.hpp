// The library profiles of mpi_profile.def as constant tables, with no MPI in sight: the runtime
// (mpi_profile.hpp) reads them for the library it is built against, and `attrcheck
// --probe-library` (src/tools/probe.cpp) compares a library's answers with them.
#pragma once

#include <cstddef>
#include <cstring>

namespace attrcheck::rt {

#define PORTABILITY(...)
#define LIBRARY(Enum, ...) Enum,
#define RELEASE(...)
#define DIVERGENCE(...)
#define BEHAVIOUR(...)
#define SEEN(...)
#define ERROR_CLASS(...)
enum class Library : unsigned char {
#include "runtime/profile/mpi_profile.def"
  Unknown
};
#undef LIBRARY
#undef RELEASE
#define LIBRARY(...)
#define RELEASE(Enum, ...) Enum,
enum class Release : unsigned char {
#include "runtime/profile/mpi_profile.def"
  Unknown
};
#undef LIBRARY
#undef RELEASE

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

#define LIBRARY(Enum, id, name, marker, null_fns, through_c, fortran_key_offset, exit_status, f08_prefix) \
  {Library::Enum, id, name, marker, null_fns, through_c, fortran_key_offset, exit_status, f08_prefix},
#define RELEASE(...)
inline constexpr MpiProfile kProfiles[] = {
#include "runtime/profile/mpi_profile.def"
    {Library::Unknown, "unknown", "an unknown MPI library", "", false, false, 0, "nonzero", "pmpi_"},
};
#undef LIBRARY
#undef RELEASE

// A release series of a library (RELEASE in mpi_profile.def).
struct ReleaseProfile {
  Release release;
  Library library;
  const char* id;      // "openmpi-5.0"
  const char* name;    // "Open MPI 5.0"
  const char* from;    // the first version of the series ("" for the oldest known)
  const char* probed;  // the version its entries were probed on
};
#define LIBRARY(...)
#define RELEASE(Enum, Lib, id, name, from, probed) {Release::Enum, Library::Lib, id, name, from, probed},
inline constexpr ReleaseProfile kReleases[] = {
#include "runtime/profile/mpi_profile.def"
    {Release::Unknown, Library::Unknown, "unknown", "an unknown release", "", ""},
};
#undef LIBRARY
#undef RELEASE
#undef DIVERGENCE
#undef BEHAVIOUR
#undef SEEN
#undef ERROR_CLASS

inline constexpr const MpiProfile& profile_of(Library l) {
  for (const MpiProfile& p : kProfiles)
    if (p.library == l) return p;
  return kProfiles[sizeof kProfiles / sizeof kProfiles[0] - 1];
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
  HiddenObject,      // the library ran a delete callback on an object it made itself, which the
                     // program never holds (a communicator a window constructor duplicated)
  KeptValue,         // a callback or answer on a value the library kept where the standard
                     // replaced it (the value a replacing set did not delete)
  WindowBase,        // MPI_WIN_BASE is not the base address the window's constructor returned
  Unclassified,      // anything else (values, answers): never a known divergence
};

struct KnownDivergence {
  const char* id;
  DivergenceSite site;
  const char* call;
  const char* behaviour;  // what the library does
  const char* standard;   // what the standard says (where)
};

#define LIBRARY(...)
#define RELEASE(...)
#define BEHAVIOUR(...)
#define SEEN(...)
#define ERROR_CLASS(...)
#define DIVERGENCE(id, Site, call, behaviour, standard) {id, DivergenceSite::Site, call, behaviour, standard},
inline constexpr KnownDivergence kDivergences[] = {
#include "runtime/profile/mpi_profile.def"
};
#undef DIVERGENCE
#undef BEHAVIOUR
#undef SEEN
#undef ERROR_CLASS

// A question where the standard is silent, and what a yes means.
struct Behaviour {
  const char* id;
  const char* meaning;
};
#define DIVERGENCE(...)
#define SEEN(...)
#define ERROR_CLASS(...)
#define BEHAVIOUR(id, meaning) {id, meaning},
inline constexpr Behaviour kBehaviours[] = {
#include "runtime/profile/mpi_profile.def"
};
#undef BEHAVIOUR
#undef SEEN

// A release series whose probe answered yes to a divergence or behaviour.
struct Seen {
  Release release;
  const char* id;
};
#define BEHAVIOUR(...)
#define SEEN(Rel, id) {Release::Rel, id},
inline constexpr Seen kSeen[] = {
#include "runtime/profile/mpi_profile.def"
};
#undef SEEN
#undef ERROR_CLASS

// The error class a release series returns itself in a situation ("abort": it aborts).
struct LibraryErrorClass {
  Release release;
  const char* situation;
  const char* error_class;
};
#define SEEN(...)
#define ERROR_CLASS(Rel, situation, cls) {Release::Rel, situation, cls},
inline constexpr LibraryErrorClass kErrorClasses[] = {
#include "runtime/profile/mpi_profile.def"
};
#undef LIBRARY
#undef RELEASE
#undef DIVERGENCE
#undef BEHAVIOUR
#undef SEEN
#undef ERROR_CLASS
#undef PORTABILITY

// A question a run can be seen to depend on (PORTABILITY): its rule is portability.QUESTION
// (checks/rules.def expands the same statements), in the same order.
struct PortabilityQuestion {
  const char* question;  // a divergence or behaviour id, or an error-class situation
  bool at_divergence;    // seen wherever the shadow cross-check sees the divergence (else by a hook)
  const char* hint;
};
#define LIBRARY(...)
#define RELEASE(...)
#define DIVERGENCE(...)
#define BEHAVIOUR(...)
#define SEEN(...)
#define ERROR_CLASS(...)
#define PORTABILITY(Enum, question, seen, hint) {question, seen[0] == 'd', hint},
inline constexpr PortabilityQuestion kPortability[] = {
#include "runtime/profile/mpi_profile.def"
};
#undef LIBRARY
#undef RELEASE
#undef DIVERGENCE
#undef BEHAVIOUR
#undef SEEN
#undef ERROR_CLASS
#undef PORTABILITY

// Compares dotted versions numerically ("4.10" after "4.2"; a missing part is 0; what follows the
// numbers, such as "rc1", is ignored).
inline int compare_versions(const char* a, const char* b) noexcept {
  while ((*a >= '0' && *a <= '9') || (*b >= '0' && *b <= '9')) {
    unsigned long x = 0, y = 0;
    while (*a >= '0' && *a <= '9') x = x * 10 + static_cast<unsigned long>(*a++ - '0');
    while (*b >= '0' && *b <= '9') y = y * 10 + static_cast<unsigned long>(*b++ - '0');
    if (x != y) return x < y ? -1 : 1;
    if (*a == '.') ++a;
    if (*b == '.') ++b;
  }
  return 0;
}

// The series of `library` that `version` ("5.0.7") belongs to: the one with the highest "from"
// at or below it (the oldest if the version cannot be read).
inline const ReleaseProfile& release_for(Library library, const char* version) noexcept {
  const ReleaseProfile* best = nullptr;
  const bool readable = version && *version >= '0' && *version <= '9';
  for (const ReleaseProfile& r : kReleases) {
    if (r.library != library) continue;
    if (!best) best = &r;  // the oldest series comes first in the table
    if (readable && compare_versions(r.from, version) <= 0 && compare_versions(r.from, best->from) > 0) best = &r;
  }
  return best ? *best : kReleases[sizeof kReleases / sizeof kReleases[0] - 1];
}

// The error class the release's probe answered for `situation` (ERROR_CLASS), or nullptr.
inline const char* error_class_of(const ReleaseProfile& release, const char* situation) noexcept {
  for (const LibraryErrorClass& e : kErrorClasses)
    if (e.release == release.release && !std::strcmp(e.situation, situation)) return e.error_class;
  return nullptr;
}

// A list of release series ids separated by commas, or "all" (--portable-to) -> a bit per Release.
// Returns nullptr, or where the first id that names no series begins (its length: up to a comma).
inline const char* parse_release_list(const char* text, unsigned* mask) noexcept {
  *mask = 0;
  const bool all = !std::strcmp(text, "all");
  for (const char* p = text;;) {
    const char* end = std::strchr(p, ',');
    const std::size_t n = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
    bool known = false;
    for (const ReleaseProfile& r : kReleases)
      if (r.library != Library::Unknown && (all || (std::strlen(r.id) == n && !std::strncmp(r.id, p, n)))) {
        *mask |= 1u << static_cast<unsigned>(r.release);
        known = true;
      }
    if (!known) return p;
    if (all || !end) return nullptr;
    p = end + 1;
  }
}

// Whether the release's probe answered yes to the divergence or behaviour `id` (SEEN).
inline bool release_has(const ReleaseProfile& release, const char* id) noexcept {
  for (const Seen& s : kSeen)
    if (s.release == release.release && !std::strcmp(s.id, id)) return true;
  return false;
}

}  // namespace attrcheck::rt
