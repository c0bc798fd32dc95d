// In-process symbolization with Boost.Stacktrace's libbacktrace backend (see symbolize.hpp).
//
// How it is linked: Boost.Stacktrace header-only with BOOST_STACKTRACE_USE_BACKTRACE, and GCC's
// own libbacktrace.a linked in statically, its symbols hidden (CMakeLists.txt). Debian's
// libboost_stacktrace_backtrace.so would not do in a preloaded tool: it exports the whole
// libbacktrace API (backtrace_create_state, ...) into every MPI program, and its libbacktrace
// reads the DWARF of every loaded module the first time it is asked anything, Debian's compressed
// /usr/lib/debug files included (libc6-dbg, which valgrind pulls in: ~1 s per process here).
// Linked statically, libbacktrace's one dl_iterate_phdr call is wrapped (-Wl,--wrap) so that it
// sees only the modules the report's frames are in, and of those only the ones cheap to read.
#define BOOST_STACKTRACE_USE_BACKTRACE
#include <boost/config.hpp>
// Boost marks its libbacktrace state (a function-local thread_local) visible, so that every
// library using Boost.Stacktrace shares one; ours must stay our own (it sees a filtered set of
// modules, and the host program may use another libbacktrace).
#undef BOOST_SYMBOL_VISIBLE
#define BOOST_SYMBOL_VISIBLE __attribute__((__visibility__("hidden")))
#include <boost/stacktrace/frame.hpp>

#include "report/symbolize.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "report/report.hpp"

namespace attrcheck {

// ---- what reading a module costs: its ELF section headers ------------------------------------

namespace {

class File {
 public:
  explicit File(const char* path) noexcept : fd_(::open(path, O_RDONLY | O_CLOEXEC)) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  bool ok() const noexcept { return fd_ >= 0; }
  bool read(void* out, std::size_t n, std::uint64_t at) const noexcept {
    auto* p = static_cast<char*>(out);
    while (n) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(at));
      if (got <= 0) return false;
      p += got;
      n -= static_cast<std::size_t>(got);
      at += static_cast<std::uint64_t>(got);
    }
    return true;
  }

 private:
  int fd_;
};

struct ElfSections {
  bool ok = false;
  bool dwarf = false;  // has .debug_info (or .zdebug_info)
  bool compressed = false;
  std::uint64_t dwarf_bytes = 0;
  std::uint64_t symtab_bytes = 0;
  std::string build_id;  // hex
  std::string debuglink;
  std::string altlink;   // .gnu_debugaltlink (dwz): more DWARF libbacktrace reads
};

bool starts_with(const char* s, const char* prefix) noexcept { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

std::string section_string(const File& f, const Elf64_Shdr& sh, std::size_t cap) {
  const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(sh.sh_size, cap));
  std::string s(n, '\0');
  if (!n || !f.read(&s[0], n, sh.sh_offset)) return {};
  s.resize(std::strlen(s.c_str()));
  return s;
}

// A 64-bit ELF file's header and section headers; false if it is not one or cannot be read.
bool section_headers(const File& f, Elf64_Ehdr& eh, std::vector<Elf64_Shdr>& sh) {
  if (!f.ok() || !f.read(&eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0)
    return false;
  sh.resize(eh.e_shnum);
  return f.read(sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff);
}

ElfSections read_sections(const char* path) {
  ElfSections out;
  File f(path);
  Elf64_Ehdr eh;
  std::vector<Elf64_Shdr> sh;
  if (!section_headers(f, eh, sh) || eh.e_shstrndx >= eh.e_shnum) return out;
  const Elf64_Shdr& names_sh = sh[eh.e_shstrndx];
  if (names_sh.sh_size > (8u << 20)) return out;
  std::string names(static_cast<std::size_t>(names_sh.sh_size) + 1, '\0');
  if (!f.read(&names[0], static_cast<std::size_t>(names_sh.sh_size), names_sh.sh_offset)) return out;
  out.ok = true;
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_name >= names_sh.sh_size || s.sh_type == SHT_NOBITS) continue;
    const char* name = names.c_str() + s.sh_name;
    if (starts_with(name, ".debug_") || starts_with(name, ".zdebug_")) {
      out.dwarf_bytes += s.sh_size;
      if (name[1] == 'z' || (s.sh_flags & SHF_COMPRESSED)) out.compressed = true;
      if (!std::strcmp(name, ".debug_info") || !std::strcmp(name, ".zdebug_info")) out.dwarf = true;
    } else if (!std::strcmp(name, ".symtab") || !std::strcmp(name, ".dynsym")) {
      out.symtab_bytes += s.sh_size;
    } else if (!std::strcmp(name, ".gnu_debuglink")) {
      out.debuglink = section_string(f, s, 4096);
    } else if (!std::strcmp(name, ".gnu_debugaltlink")) {
      out.altlink = section_string(f, s, 4096);
    } else if (s.sh_type == SHT_NOTE && s.sh_size <= 1024) {
      unsigned char note[1024];
      if (!f.read(note, static_cast<std::size_t>(s.sh_size), s.sh_offset) || s.sh_size < sizeof(Elf64_Nhdr)) continue;
      Elf64_Nhdr nh;
      std::memcpy(&nh, note, sizeof nh);
      const std::size_t desc = sizeof nh + ((nh.n_namesz + 3u) & ~3u);
      if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 || std::memcmp(note + sizeof nh, "GNU", 4) != 0 ||
          desc + nh.n_descsz > s.sh_size)
        continue;
      static const char hex[] = "0123456789abcdef";
      out.build_id.clear();
      for (std::size_t i = 0; i < nh.n_descsz; ++i) {
        out.build_id += hex[note[desc + i] >> 4];
        out.build_id += hex[note[desc + i] & 15];
      }
    }
  }
  return out;
}

bool exists(const std::string& path) {
  struct stat st{};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// Adds a debug file's DWARF (and its dwz companion's) to `cost`.
void add_debug_file(ModuleCost& cost, const std::string& path) {
  const ElfSections d = read_sections(path.c_str());
  if (!d.ok || !d.dwarf) return;
  cost.dwarf = true;
  cost.compressed = cost.compressed || d.compressed;
  cost.dwarf_bytes = std::max(cost.dwarf_bytes, d.dwarf_bytes);
  cost.symtab_bytes += d.symtab_bytes;
  if (cost.debug_file.empty()) cost.debug_file = path;
  if (!d.altlink.empty()) {
    const std::string alt = d.altlink[0] == '/' ? d.altlink : directory_of(path) + "/" + d.altlink;
    const ElfSections a = read_sections(alt.c_str());
    if (a.ok) {
      cost.compressed = cost.compressed || a.compressed;
      cost.dwarf_bytes += a.dwarf_bytes;
    }
  }
}

}  // namespace

ModuleCost module_cost(const char* path) noexcept {
  ModuleCost cost;
  try {
    const ElfSections m = read_sections(path);
    if (!m.ok) return cost;
    cost.elf = true;
    cost.symtab_bytes = m.symtab_bytes;
    if (m.dwarf) {
      cost.dwarf = true;
      cost.compressed = m.compressed;
      cost.dwarf_bytes = m.dwarf_bytes;
    }
    // Where libbacktrace looks for separate DWARF (it prefers it to the module's own): by build
    // id, then by debug link. Counted as it would be read: the worse of what is there.
    if (m.build_id.size() > 2) {
      const std::string by_id = "/usr/lib/debug/.build-id/" + m.build_id.substr(0, 2) + "/" + m.build_id.substr(2) + ".debug";
      if (exists(by_id)) add_debug_file(cost, by_id);
    }
    if (!m.debuglink.empty() && cost.debug_file.empty()) {
      const std::string dir = directory_of(path);
      for (const std::string& candidate : {dir + "/" + m.debuglink, dir + "/.debug/" + m.debuglink,
                                           "/usr/lib/debug" + dir + "/" + m.debuglink}) {
        if (candidate != path && exists(candidate)) {
          add_debug_file(cost, candidate);
          break;
        }
      }
    }
  } catch (...) {
    cost = ModuleCost{};
  }
  return cost;
}

// ---- names from symbol tables, where the DWARF is too costly to read here --------------------

namespace {

// The functions of one ELF file's symbol tables (.symtab and .dynsym), sorted by address.
struct FunctionSymbols {
  struct Symbol {
    std::uint64_t value, size;
    std::uint32_t name;  // offset into `names`
    bool global;
  };
  std::vector<Symbol> symbols;
  std::string names;

  // Reads `path`'s symbol tables, counting their bytes against `budget`; false if it could not.
  bool read(const char* path, std::uint64_t& budget) {
    File f(path);
    Elf64_Ehdr eh;
    std::vector<Elf64_Shdr> sh;
    if (!section_headers(f, eh, sh)) return false;
    for (const Elf64_Shdr& table : sh) {
      if ((table.sh_type != SHT_SYMTAB && table.sh_type != SHT_DYNSYM) || table.sh_link >= sh.size() ||
          table.sh_entsize != sizeof(Elf64_Sym))
        continue;
      const Elf64_Shdr& strtab = sh[table.sh_link];
      if (strtab.sh_type != SHT_STRTAB || table.sh_size + strtab.sh_size > budget) return false;
      budget -= table.sh_size + strtab.sh_size;
      const std::size_t base = names.size();
      names.resize(base + static_cast<std::size_t>(strtab.sh_size) + 1, '\0');  // ends in a NUL
      std::vector<Elf64_Sym> entries(static_cast<std::size_t>(table.sh_size / sizeof(Elf64_Sym)));
      if (!f.read(&names[base], static_cast<std::size_t>(strtab.sh_size), strtab.sh_offset) ||
          !f.read(entries.data(), entries.size() * sizeof(Elf64_Sym), table.sh_offset))
        return false;
      for (const Elf64_Sym& e : entries) {
        const unsigned type = ELF64_ST_TYPE(e.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || e.st_shndx == SHN_UNDEF || e.st_size == 0 ||
            e.st_name == 0 || e.st_name >= strtab.sh_size)
          continue;
        symbols.push_back(Symbol{e.st_value, e.st_size, static_cast<std::uint32_t>(base + e.st_name),
                                 ELF64_ST_BIND(e.st_info) != STB_LOCAL});
      }
    }
    std::sort(symbols.begin(), symbols.end(), [](const Symbol& a, const Symbol& b) { return a.value < b.value; });
    return true;
  }

  // The function whose extent holds `address` (module-relative), or nullptr: never the nearest
  // symbol before it. Of aliases, an exported name; of nested extents, the innermost.
  const char* at(std::uint64_t address) const noexcept {
    auto it = std::upper_bound(symbols.begin(), symbols.end(), address,
                               [](std::uint64_t a, const Symbol& s) { return a < s.value; });
    const Symbol* best = nullptr;
    for (int scanned = 0; it != symbols.begin() && scanned < 64; ++scanned) {
      const Symbol& s = *--it;
      if (best && s.value < best->value) break;
      if (address - s.value < s.size && (!best || (s.global && !best->global))) best = &s;
    }
    return best ? names.c_str() + best->name : nullptr;
  }
};

// A symbol's name as a reader knows it: demangled, without its version ("f@@GLIBC_2.34").
std::string demangled(const char* symbol) {
  std::string name(symbol, std::strcspn(symbol, "@"));
  if (name.compare(0, 2, "_Z") != 0) return name;
  int status = -1;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

// The module's load bias (what its symbol values are relative to), as the dynamic loader has it.
bool load_bias(std::uintptr_t pc, std::uintptr_t& bias) noexcept {
  Dl_info dl{};
  link_map* map = nullptr;
  if (!dladdr1(reinterpret_cast<const void*>(pc), &dl, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) || !map)
    return false;
  bias = map->l_addr;
  return true;
}

}  // namespace

// ---- what libbacktrace sees: the admitted modules only -----------------------------------------

namespace {
// One address inside each module libbacktrace may read; set only while symbolize_findings runs
// (libbacktrace enumerates the modules once, the first time it is asked). When the program's own
// executable is not among them, libbacktrace may keep its descriptor of /proc/self/exe
// (O_CLOEXEC) open after MPI_Finalize: it opens it first and closes it at the executable's turn.
std::atomic<const std::vector<std::uintptr_t>*> g_admitted{nullptr};

struct FilterContext {
  int (*callback)(dl_phdr_info*, std::size_t, void*);
  void* data;
  const std::vector<std::uintptr_t>* admitted;
};

int filter_module(dl_phdr_info* info, std::size_t size, void* p) {
  const auto* c = static_cast<const FilterContext*>(p);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    for (const std::uintptr_t a : *c->admitted)
      if (a >= lo && a < hi) return c->callback(info, size, c->data);
  }
  return 0;
}
}  // namespace

extern "C" {
int __real_dl_iterate_phdr(int (*callback)(dl_phdr_info*, std::size_t, void*), void* data);

// libbacktrace's (and only libbacktrace's: --wrap binds the references inside libattrcheck.so)
// dl_iterate_phdr.
__attribute__((visibility("hidden"))) int __wrap_dl_iterate_phdr(int (*callback)(dl_phdr_info*, std::size_t, void*),
                                                                 void* data) {
  const std::vector<std::uintptr_t>* admitted = g_admitted.load(std::memory_order_acquire);
  if (!admitted) return __real_dl_iterate_phdr(callback, data);
  FilterContext c{callback, data, admitted};
  return __real_dl_iterate_phdr(filter_module, &c);
}
}

// ---- the pass ------------------------------------------------------------------------------------

namespace {

struct Wanted {
  std::uintptr_t pc;  // the address to look up (lookup_pc)
  const char* path;   // its module, as the report names it
};

// The frame's module is still the one it was recorded in (not unloaded and replaced since).
bool still_mapped(const void* address, std::uint64_t offset) noexcept {
  Dl_info dl{};
  return address && dladdr(address, &dl) && dl.dli_fbase &&
         static_cast<std::uint64_t>(static_cast<const char*>(address) - static_cast<const char*>(dl.dli_fbase)) == offset;
}

void collect(const FindingStore& store, std::vector<Wanted>& out) {
  auto frame = [&](const void* address, bool entry, std::uint64_t offset, const char* path) {
    if (!address || !path || path[0] != '/' || !still_mapped(address, offset)) return;
    out.push_back(Wanted{lookup_pc(address, entry), path});
  };
  auto stack = [&](const StackRec& s) {
    for (int i = 0; i < s.depth; ++i)
      frame(s.frames[i].address, s.frames[i].entry, s.frames[i].offset, store.module(s.frames[i].module));
  };
  for (std::size_t i = 0; i < store.size(); ++i) {
    const Finding& f = store.at(i);
    if (!f.committed.load(std::memory_order_acquire)) continue;
    frame(f.site, f.site_is_entry, f.offset, f.module);
    stack(f.stack);
    for (int k = 0; k < f.provenance_count; ++k) stack(f.provenance[k].stack);
  }
}

std::atomic<bool> g_done{false};

}  // namespace

namespace {

// Names `wanted` (addresses of this process) within the limits: the table, or nullptr if nothing
// was named. Throws only what allocation throws.
std::unique_ptr<SymbolTable> name_wanted(const std::vector<Wanted>& wanted, const SymbolizeLimits& limits,
                                         std::vector<std::uintptr_t>& admitted) {
  // How each module is read, in the order the report first refers to them: libbacktrace reads
  // its DWARF (or, without DWARF, its symbol table); a module whose DWARF is compressed is
  // named from its symbol tables here instead (no file and line: ATTRCHECK_SYMBOLIZE=0 leaves
  // every frame to attrcheck-report, which gets them from the DWARF, slowly).
  enum class Way { Skip, Libbacktrace, SymbolTable };
  std::map<std::string, Way> way;
  std::map<std::string, FunctionSymbols> symbol_tables;
  std::uint64_t dwarf = 0, symtab = 0;  // bytes read (or to be read, by libbacktrace)
  for (const Wanted& w : wanted) {
    if (way.count(w.path)) continue;
    const ModuleCost c = module_cost(w.path);
    Way how = Way::Skip;
    if (c.elf && !c.compressed && symtab + c.symtab_bytes <= limits.symtab_budget &&
        dwarf + c.dwarf_bytes <= limits.dwarf_budget) {
      dwarf += c.dwarf_bytes;
      symtab += c.symtab_bytes;
      admitted.push_back(w.pc);
      how = Way::Libbacktrace;
    } else if (c.elf && c.compressed) {
      FunctionSymbols& t = symbol_tables[w.path];
      std::uint64_t left = limits.symtab_budget - symtab;
      bool ok = t.read(w.path, left);
      if (ok && !c.debug_file.empty()) ok = t.read(c.debug_file.c_str(), left);  // its locals
      symtab = limits.symtab_budget - left;
      if (ok) how = Way::SymbolTable;
    }
    way.emplace(w.path, how);
  }
  auto table = std::make_unique<SymbolTable>();
  std::vector<std::uintptr_t> pcs;
  for (const Wanted& w : wanted) {
    const Way how = way[w.path];
    if (how == Way::Libbacktrace) pcs.push_back(w.pc);
    std::uintptr_t bias = 0;
    if (how != Way::SymbolTable || !load_bias(w.pc, bias)) continue;
    // Only a name found is published: an address named by no symbol stays for the offline pass.
    if (const char* name = symbol_tables[w.path].at(w.pc - bias)) table->add(w.pc, demangled(name), "", 0);
  }
  std::sort(pcs.begin(), pcs.end());
  pcs.erase(std::unique(pcs.begin(), pcs.end()), pcs.end());
  if (!admitted.empty()) {
    g_admitted.store(&admitted, std::memory_order_release);
    for (const std::uintptr_t pc : pcs) {
      const boost::stacktrace::frame fr(reinterpret_cast<const void*>(pc));
      table->add(pc, fr.name(), fr.source_file(), static_cast<long>(fr.source_line()));
    }
    g_admitted.store(nullptr, std::memory_order_release);
  }
  table->seal();
  if (!table->size()) return nullptr;
  return table;
}

// Where each module loaded here starts, by the path reports name it by (dladdr's base; the
// program itself by its absolute path).
int note_module(dl_phdr_info* info, std::size_t, void* p) {
  auto* bases = static_cast<std::map<std::string, std::uintptr_t>*>(p);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
    Dl_info dl{};
    if (!dladdr(reinterpret_cast<const void*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr), &dl) || !dl.dli_fname ||
        !dl.dli_fbase)
      return 0;
    char path[PATH_MAX];
    module_path(dl.dli_fname, path, sizeof path);
    bases->emplace(path, reinterpret_cast<std::uintptr_t>(dl.dli_fbase));
    return 0;
  }
  return 0;
}

}  // namespace

std::unique_ptr<SymbolTable> symbolize_frames(const std::vector<ModuleFrame>& frames,
                                              std::vector<std::uintptr_t>* addresses,
                                              const SymbolizeLimits& limits) noexcept {
  std::vector<std::uintptr_t> admitted;
  try {
    addresses->assign(frames.size(), 0);
    std::map<std::string, std::uintptr_t> bases;
    dl_iterate_phdr(note_module, &bases);
    std::vector<Wanted> wanted;
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const ModuleFrame& f = frames[i];
      auto it = bases.find(f.module);
      if (f.module.empty() || f.module[0] != '/' || it == bases.end()) continue;
      const void* address = reinterpret_cast<const void*>(it->second + f.offset);
      if (!still_mapped(address, f.offset)) continue;
      (*addresses)[i] = lookup_pc(address, f.entry);
      wanted.push_back(Wanted{(*addresses)[i], f.module.c_str()});
    }
    if (wanted.empty()) return nullptr;
    return name_wanted(wanted, limits, admitted);
  } catch (...) {
    g_admitted.store(nullptr, std::memory_order_release);
    return nullptr;
  }
}

std::size_t symbolize_findings(FindingStore& store, const SymbolizeLimits& limits) noexcept {
  if (g_done.exchange(true)) return 0;
  std::vector<std::uintptr_t> admitted;
  try {
    std::vector<Wanted> wanted;
    collect(store, wanted);
    if (wanted.empty()) return 0;  // a clean run reads nothing
    std::unique_ptr<SymbolTable> table = name_wanted(wanted, limits, admitted);
    if (!table) return 0;
    const std::size_t n = table->size();
    if (n) store.set_symbols(table.release());  // never freed: a signal handler may be rendering from it
    return n;
  } catch (...) {
    g_admitted.store(nullptr, std::memory_order_release);
    return 0;
  }
}

}  // namespace attrcheck
