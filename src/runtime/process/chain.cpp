// attrcheck in a chain of PMPI tools (see chain.hpp): each wrapper's next hop, the library's own
// entry points, and the modules in front of attrcheck.
#include "runtime/process/chain.hpp"

#include "runtime/process/rank_report.hpp"
#include "runtime/profile/mpi_profile.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace attrcheck::rt {

bool g_chained = false;
}  // namespace attrcheck::rt
extern "C" {
bool attrcheck_other_library_calls = false;
}
namespace attrcheck::rt {
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

namespace {

// Another MPI library than attrcheck's own in the process, which the program calls (other_library).
struct Other {
  char module[96];   // its file name: libmpich.so.12, libmpi_abi.so.1
  char version[96];  // the first line of what its MPI_Get_library_version says
};
Other g_other{};
std::atomic<bool> g_other_found{false};

// The PMPI_Get_library_version of another MPI library than attrcheck's, or nullptr, when the
// library attrcheck is built for (ATTRCHECK_MPI_SONAME, loaded with attrcheck) defines another:
// the next one in the global scope, where the program's own libraries come before attrcheck's;
// with `every_module`, also one that any loaded module defines or depends on (one opened with
// dlopen is not in the global scope). Each module's handle is taken after the walk of the loaded
// modules, not in it (dlopen under dl_iterate_phdr's lock).
void* other_version_fn(bool every_module) noexcept {
  void* own_library = dlopen(ATTRCHECK_MPI_SONAME, RTLD_LAZY | RTLD_NOLOAD);
  if (!own_library) return nullptr;  // attrcheck's library is not here: nothing can be compared
  void* own = dlsym(own_library, "PMPI_Get_library_version");
  dlclose(own_library);
  if (!own) return nullptr;
  auto other = [own](void* f) { return f && f != own && module_of(f) != g_own_base; };
  if (void* next = dlsym(RTLD_NEXT, "PMPI_Get_library_version"); other(next)) return next;
  if (!every_module) return nullptr;
  std::vector<std::string> modules;
  try {
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) noexcept -> int {
          if (info->dlpi_name && info->dlpi_name[0]) {
            try {
              static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
            } catch (...) {
              return 1;
            }
          }
          return 0;
        },
        &modules);
  } catch (...) {
    return nullptr;
  }
  for (const std::string& m : modules) {
    void* h = dlopen(m.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    void* f = dlsym(h, "PMPI_Get_library_version");
    dlclose(h);
    // (A module that defines none gets the first of its dependencies'; attrcheck's own and every
    // module built on its library get `own`.)
    if (other(f)) return f;
  }
  return nullptr;
}

// Once it is found: attrcheck's C wrappers pass every call to that library, as it is.
void adopt(void* version_fn) noexcept {
  Dl_info info;
  if (!dladdr(version_fn, &info) || !info.dli_fname) return;
  void* library = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!library) return;
  std::snprintf(g_other.module, sizeof g_other.module, "%s", module_name(version_fn));
  // MPI_Get_library_version may be called at any time, before MPI_Init too; its arguments are a
  // buffer and an int in every ABI. (MPI_MAX_LIBRARY_VERSION_STRING: Open MPI's 256, MPICH's and
  // the standard ABI's 8192.)
  static char version[8192];
  int length = 0;
  if (reinterpret_cast<int (*)(char*, int*)>(version_fn)(version, &length) == 0) {
    version[sizeof version - 1] = '\0';
    version[std::strcspn(version, "\n,")] = '\0';
    // (its first line, up to a comma, blanks as spaces: "MPICH Version:\t4.0.2" reads "MPICH Version: 4.0.2")
    std::size_t n = 0;
    for (const char* c = version; *c && n + 1 < sizeof g_other.version; ++c)
      if (*c != ' ' && *c != '\t') {
        g_other.version[n++] = *c;
      } else if (n > 0 && g_other.version[n - 1] != ' ') {
        g_other.version[n++] = ' ';
      }
    g_other.version[n] = '\0';
  }
  g_library = library;
  g_library_base = info.dli_fbase;
  for (std::size_t i = 0; i < kChainLinkCount; ++i)
    if (kChainLinks[i].next)
      if (void* f = dlsym(library, kChainLinks[i].pmpi)) *kChainLinks[i].next = f;
  g_other_found.store(true, std::memory_order_release);
  attrcheck_other_library_calls = true;
  // One line, from the first rank (or a process no launcher numbered), on stderr: the report
  // says it again (tool.other-mpi).
  const char* rank = launcher_rank();
  if (!rank || std::strcmp(rank, "0") == 0) {
    char detail[512];
    other_library(detail, sizeof detail);
    std::fprintf(stderr, "attrcheck: %s\n", detail);
  }
}

}  // namespace

bool adopt_other_library(bool every_module) noexcept {
  if (g_other_found.load(std::memory_order_acquire)) return true;
  if (void* f = other_version_fn(every_module)) adopt(f);
  return g_other_found.load(std::memory_order_acquire);
}

bool other_library(char* detail, std::size_t size) noexcept {
  if (!g_other_found.load(std::memory_order_acquire)) return false;
  const bool abi = std::strncmp(g_other.module, "libmpi_abi.", 11) == 0;
  // (The attrcheck launcher picks the build for the program it starts: these say what to preload.)
  const char* use = abi ? "Use attrcheck's standard ABI build, libattrcheck_abi.so (the attrcheck launcher picks it "
                          "for a program that needs libmpi_abi.so.1)"
                    : std::strstr(g_other.version, "MPICH") ? "Use attrcheck built for MPICH (ATTRCHECK_MPI=mpich), libattrcheck.so"
                    : std::strstr(g_other.version, "Open MPI")
                        ? "Use attrcheck built for Open MPI (ATTRCHECK_MPI=openmpi), libattrcheck.so"
                        : "Use attrcheck built for the program's MPI library";
  std::snprintf(detail, size,
                "the program runs on %s (%s%s), and this attrcheck is built for %s (%s): it passed every call to "
                "the program's library unchecked, and checked nothing. %s",
                g_other.version[0] ? g_other.version : "another MPI library", g_other.module,
                abi ? ", the MPI standard ABI" : "", kProfile.name, ATTRCHECK_MPI_SONAME, use);
  return true;
}

void absent_function(const char* name) noexcept {
  // (What ld.so prints for a symbol it cannot bind, with attrcheck's name: write(2), no stdio.)
  char line[512];
  const int n = std::snprintf(line, sizeof line,
                              "attrcheck: the program calls %s, which the MPI library in use (%s) does not define: it "
                              "stops here, as it does natively (a symbol lookup error, exit status 127)\n",
                              name, g_library_base ? module_name(g_library_base) : "?");
  if (n > 0) (void)!write(2, line, static_cast<std::size_t>(n < int(sizeof line) ? n : int(sizeof line) - 1));
  _exit(127);
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
