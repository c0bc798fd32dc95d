#include "report/modules.hpp"
#include "report/report.hpp"

#include <link.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace attrcheck {

namespace {
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

}  // namespace

const void* own_base() noexcept {
  static const void* base = [] {
    Dl_info dl{};
    return dladdr(reinterpret_cast<const void*>(&own_base), &dl) ? dl.dli_fbase : nullptr;
  }();
  return base;
}

bool is_tool_frame(const Dl_info& dl) noexcept {
  if (dl.dli_fbase == own_base()) return true;
  if (std::strncmp(base_name(dl.dli_fname ? dl.dli_fname : ""), "libattrcheck", 12) == 0) return true;
  return is_mpi_module(dl.dli_fbase);
}

void module_path(const char* name, char* out, std::size_t size) noexcept {
  char absolute[PATH_MAX];
  const bool relative = name[0] != '/' && realpath(name, absolute);
  copy_str(out, size, relative ? absolute : name);
}

}  // namespace attrcheck
