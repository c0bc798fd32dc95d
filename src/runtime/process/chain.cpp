// attrcheck in a chain of PMPI tools (see chain.hpp): each wrapper's next hop, the library's own
// entry points, and the modules in front of attrcheck.
#include "runtime/process/chain.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace attrcheck::rt {

bool g_chained = false;
const char kChainFrame[] = "attrcheck: a call passed to the next tool";

namespace {

const void* module_of(const void* address) noexcept {
  Dl_info info;
  if (!address || !dladdr(address, &info)) return nullptr;
  return info.dli_fbase;
}
const char* module_name(const void* address) noexcept {
  Dl_info info;
  if (!address || !dladdr(address, &info) || !info.dli_fname) return "?";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

// The MPI library: the module that defines the next PMPI_Get_library_version after attrcheck (a
// call no tool has a reason to take over), opened again for dlsym on it and what it depends on.
void* g_library = nullptr;
const void* g_library_base = nullptr;
const void* g_own_base = nullptr;

// What is in front of attrcheck: how many of the keyval, attribute and object entry points modules
// loaded before it define, the first of them and its module.
struct Front {
  const char* first_name;
  char module[128];
  int count;
};
Front g_front{};

// Whether `address` is the library's own `name` (in its module or one it depends on: Open MPI
// 6.0 keeps its core in libopen_mpi).
bool library_defines(const char* name, const void* address) noexcept {
  return g_library && dlsym(g_library, name) == address;
}

}  // namespace

void* library_symbol(const char* pmpi, void* fallback) noexcept {
  void* f = g_library ? dlsym(g_library, pmpi) : nullptr;
  return f ? f : fallback;
}

void* fortran_next(const char* name, const char* pmpi) noexcept {
  void* own = dlsym(RTLD_DEFAULT, pmpi);
  void* next = dlsym(RTLD_NEXT, name);
  const void* base = module_of(next);
  if (next && own && base && base != module_of(own) && base != g_library_base) return next;
  return own;
}

void resolve_chain() noexcept {
  g_own_base = module_of(reinterpret_cast<const void*>(&resolve_chain));
  if (void* version = dlsym(RTLD_NEXT, "PMPI_Get_library_version")) {
    Dl_info info;
    if (dladdr(version, &info) && info.dli_fname) {
      g_library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
      g_library_base = info.dli_fbase;
    }
  }
  for (std::size_t i = 0; i < kChainLinkCount; ++i) {
    const ChainLink& l = kChainLinks[i];
    if (!l.next && l.binding == static_cast<std::uint8_t>(Lang::Fortran) &&
        fortran_next(l.name, l.pmpi) != dlsym(RTLD_DEFAULT, l.pmpi))
      g_chained = true;  // (its wrapper finds the hop itself, at its first call)
    if (l.next) {
      // The next MPI_X: a tool's if it is not the library's (the library's MPI_X is its PMPI_X).
      void* next = dlsym(RTLD_NEXT, l.name);
      const void* base = module_of(next);
      if (next && base && base != g_library_base && !library_defines(l.name, next)) {
        *l.next = next;
        g_chained = true;
      } else if (void* own = g_library ? dlsym(g_library, l.pmpi) : nullptr) {
        *l.next = own;
      }
    }
    // The first MPI_X in load order: a module in front of attrcheck if it is not attrcheck's.
    void* first = dlsym(RTLD_DEFAULT, l.name);
    const void* base = module_of(first);
    if (!first || !base || base == g_own_base || base == g_library_base || library_defines(l.name, first) ||
        l.family >= kCallFamilies)
      continue;
    // (MPI_Init, MPI_Finalize and MPI_Abort left out: a run started past them is adopted.)
    if (g_front.count++ == 0) {
      g_front.first_name = l.name;
      std::snprintf(g_front.module, sizeof g_front.module, "%s", module_name(first));
    }
  }
}

bool front_takes_calls() noexcept { return g_front.count > 0; }

bool bypassed(char* detail, std::size_t size) noexcept {
  if (!front_takes_calls()) return false;  // only MPI_Init, MPI_Finalize, MPI_Abort: the run is adopted
  char more[32] = "";
  if (g_front.count > 1) std::snprintf(more, sizeof more, " and %d more", g_front.count - 1);
  std::snprintf(detail, size,
                "%s, loaded before attrcheck, defines %s%s of the calls attrcheck checks: the program's calls "
                "reach it first, and attrcheck cannot know that it passes each of them on (a tool that calls "
                "PMPI_ itself does not), so attrcheck passed every call to the MPI library unchecked. This run "
                "was not checked: load attrcheck first (the attrcheck launcher puts it first in LD_PRELOAD "
                "unless --preload-first names the tool)",
                g_front.module, g_front.first_name, more);
  return true;
}

}  // namespace attrcheck::rt
