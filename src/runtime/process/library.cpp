// What the runtime asks the MPI library directly, through PMPI (see library.hpp).
#include "runtime/process/library.hpp"

#include <dlfcn.h>

#include <type_traits>

#include "runtime/process/call.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/chain.hpp"
#include "runtime/profile/mpi_profile.hpp"

namespace attrcheck::rt {

namespace {
// MPICH: whether the library takes `h` as a live communicator or window, asked with a query that
// changes nothing, under MPI_ERRORS_RETURN (an invalid handle is reported through
// MPI_COMM_WORLD's error handler, which is fatal by default: it is swapped for the query and
// put back, which only a program whose threads all call MPI could see).
bool library_validates(ObjectKind kind, Handle h) noexcept {
  MPI_Errhandler saved = MPI_ERRHANDLER_NULL;
  if (PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &saved) != MPI_SUCCESS) return false;
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = MPI_ERR_OTHER;
  if (kind == ObjectKind::Comm) {
    int flag = 0;
    rc = PMPI_Comm_test_inter(from_handle<MPI_Comm>(h), &flag);
  } else if (kind == ObjectKind::Win) {
    char name[MPI_MAX_OBJECT_NAME];
    int length = 0;
    rc = PMPI_Win_get_name(from_handle<MPI_Win>(h), name, &length);
  }
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, saved);
  PMPI_Errhandler_free(&saved);
  return rc == MPI_SUCCESS;
}

// Open MPI: whether the communicator or window table (read through f2c, or the standard ABI's
// fromint, from `base` on) holds `h`. A new object takes the lowest free slot, so the live ones lie
// below the last slot in use: the walk ends after 4,096 empty slots in a row.
bool table_holds(ObjectKind kind, Handle h, Fint base) noexcept {
  constexpr Fint kEmptyRun = 4096, kMax = 1 << 24;
  const Handle null = kind == ObjectKind::Comm ? handle(MPI_COMM_NULL) : handle(MPI_WIN_NULL);
  for (Fint f = base, last = base - 1; f < base + kMax && f - last <= kEmptyRun; ++f) {
    const Handle got = c_handle(kind, f);
    if (got == h) return true;
    if (got != 0 && got != null) last = f;
  }
  return false;
}

// Open MPI's libmpi_abi: the integer of the first slot of a handle table (below: the constants).
constexpr Fint kOpenMpiAbiTableBase = 16385;
}  // namespace

bool library_has_live(ObjectKind kind, Handle h) noexcept {
  if (phase() != Phase::Running) return false;
  if constexpr (kStandardAbi) {
    // The standard ABI: handles are pointers on every library (MPI_Comm_fromint and _toint
    // replace f2c and c2f), and what they point at is the library's own business.
    if (kind == ObjectKind::Type) return false;  // (neither library's tables hold every datatype)
    if (running_library() == Library::OpenMpi) {
      // Open MPI's libmpi_abi maps an integer above 16384 through the object's table (16384 +
      // its Fortran index; below are the predefined constants, returned as they are) and
      // gives NULL for an empty slot: the walk of the native build, from that base.
      return table_holds(kind, h, kOpenMpiAbiTableBase);
    }
    // MPICH's libmpi_abi: fromint is a cast (it gives a freed object's handle back), but the
    // library validates a communicator handed to it; a freed window is taken as valid
    // (MPI_Win_get_name succeeds on it): only communicators can be asked about.
    if (running_library() != Library::Mpich || kind != ObjectKind::Comm ||
        state().thread_level >= MPI_THREAD_MULTIPLE)
      return false;
    return library_validates(kind, h);
  } else if constexpr (!std::is_integral_v<MPI_Comm>) {
    // Open MPI: C handles are the objects' addresses, and the library does not check that one
    // names a live object (it reads the freed memory: a second MPI_Comm_free of a handle returns
    // MPI_SUCCESS), so the handle is never handed to it. Its communicator and window tables (the
    // Fortran handles) map exactly the live objects (a freed object's slot is emptied), and f2c
    // reads only the table: the handle is live if some slot holds it. A datatype enters its table
    // only when MPI_Type_c2f is first called on it (which reads the object): a datatype cannot be
    // asked about.
    if (kind == ObjectKind::Type) return false;
    return table_holds(kind, h, 0);
  } else {
    // MPICH: handles are integers the library validates, but a freed datatype's is taken as valid
    // (MPI_Type_get_name and MPI_Type_size succeed, MPI_Type_get_envelope crashes): only
    // communicators and windows can be asked about, and only where no other thread may be
    // calling MPI while MPI_COMM_WORLD's error handler is swapped.
    if (kind == ObjectKind::Type || state().thread_level >= MPI_THREAD_MULTIPLE) return false;
    return library_validates(kind, h);
  }
}

void* fortran_pmpi(const char* name) noexcept { return dlsym(RTLD_DEFAULT, name); }

bool library_attr(ObjectKind kind, Handle h, int key, std::uint64_t* value, Binding lang) noexcept {
  if (lang != Binding::C) {
    // A Fortran-set value: read it as Fortran does (a C read would give a pointer to it).
    using Get = void (*)(Fint*, Fint*, MPI_Aint*, Fint*, Fint*);
    static const char* const names[] = {"pmpi_comm_get_attr_", "pmpi_type_get_attr_", "pmpi_win_get_attr_"};
    auto get = reinterpret_cast<Get>(fortran_pmpi(names[static_cast<int>(kind)]));
    if (!get) return false;
    Fint object = fortran_handle(kind, h), fkey = key, logical = 0, ierr = 0;
    MPI_Aint v = 0;
    get(&object, &fkey, &v, &logical, &ierr);
    if (ierr != MPI_SUCCESS || !logical) return false;
    if (value) *value = static_cast<std::uint64_t>(v);
    return true;
  }
  void* v = nullptr;
  int flag = 0;
  int rc;
  switch (kind) {
    case ObjectKind::Comm: rc = ATTRCHECK_LIBRARY(PMPI_Comm_get_attr)(from_handle<MPI_Comm>(h), key, &v, &flag); break;
    case ObjectKind::Type: rc = ATTRCHECK_LIBRARY(PMPI_Type_get_attr)(from_handle<MPI_Datatype>(h), key, &v, &flag); break;
    default: rc = ATTRCHECK_LIBRARY(PMPI_Win_get_attr)(from_handle<MPI_Win>(h), key, &v, &flag); break;
  }
  if (rc != MPI_SUCCESS || !flag) return false;
  if (value) *value = reinterpret_cast<std::uintptr_t>(v);
  return true;
}

Fint fortran_handle(ObjectKind kind, Handle h) noexcept {
#if defined(ATTRCHECK_STANDARD_ABI)
  switch (kind) {
    case ObjectKind::Comm: return PMPI_Comm_toint(from_handle<MPI_Comm>(h));
    case ObjectKind::Type: return PMPI_Type_toint(from_handle<MPI_Datatype>(h));
    case ObjectKind::Win: return PMPI_Win_toint(from_handle<MPI_Win>(h));
  }
#else
  switch (kind) {
    case ObjectKind::Comm: return PMPI_Comm_c2f(from_handle<MPI_Comm>(h));
    case ObjectKind::Type: return PMPI_Type_c2f(from_handle<MPI_Datatype>(h));
    case ObjectKind::Win: return PMPI_Win_c2f(from_handle<MPI_Win>(h));
  }
#endif
  return 0;
}

Handle c_handle(ObjectKind kind, Fint f) noexcept {
#if defined(ATTRCHECK_STANDARD_ABI)
  switch (kind) {
    case ObjectKind::Comm: return handle(PMPI_Comm_fromint(f));
    case ObjectKind::Type: return handle(PMPI_Type_fromint(f));
    case ObjectKind::Win: return handle(PMPI_Win_fromint(f));
  }
#else
  switch (kind) {
    case ObjectKind::Comm: return handle(PMPI_Comm_f2c(f));
    case ObjectKind::Type: return handle(PMPI_Type_f2c(f));
    case ObjectKind::Win: return handle(PMPI_Win_f2c(f));
  }
#endif
  return 0;
}

}  // namespace attrcheck::rt
