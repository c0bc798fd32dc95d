// Reads DT_NEEDED from an ELF64 file: the program headers give PT_DYNAMIC and the PT_LOAD
// segments, which map the dynamic section's string table address (DT_STRTAB) to a file offset.
// Every offset is checked against the file's size: a truncated or hostile file yields nothing.
#include "tools/elf_needed.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>

namespace attrcheck::tools {

namespace {

template <typename T>
bool read_at(const std::string& file, std::size_t offset, T* out) {
  if (offset > file.size() || file.size() - offset < sizeof(T)) return false;
  std::memcpy(out, file.data() + offset, sizeof(T));
  return true;
}

}  // namespace

std::vector<std::string> elf_needed(const std::string& path) noexcept {
  std::vector<std::string> needed;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return needed;
    // (a program's headers and dynamic section lie in its first few MiB; 64 MiB bounds the read)
    std::string file;
    file.resize(64u << 20);
    in.read(&file[0], static_cast<std::streamsize>(file.size()));
    file.resize(static_cast<std::size_t>(in.gcount()));
    Elf64_Ehdr eh;
    if (!read_at(file, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_phentsize != sizeof(Elf64_Phdr))
      return needed;
    std::vector<Elf64_Phdr> loads;
    Elf64_Phdr dynamic{};
    bool has_dynamic = false;
    for (unsigned i = 0; i < eh.e_phnum; ++i) {
      Elf64_Phdr ph;
      if (!read_at(file, eh.e_phoff + i * sizeof ph, &ph)) return needed;
      if (ph.p_type == PT_LOAD) loads.push_back(ph);
      if (ph.p_type == PT_DYNAMIC) dynamic = ph, has_dynamic = true;
    }
    if (!has_dynamic) return needed;
    auto offset_of = [&](Elf64_Addr address, std::size_t* offset) {
      for (const Elf64_Phdr& l : loads)
        if (address >= l.p_vaddr && address - l.p_vaddr < l.p_filesz) {
          *offset = l.p_offset + (address - l.p_vaddr);
          return true;
        }
      return false;
    };
    std::vector<Elf64_Xword> names;
    Elf64_Addr strtab = 0;
    Elf64_Xword strsz = 0;
    for (std::size_t at = dynamic.p_offset; at + sizeof(Elf64_Dyn) <= dynamic.p_offset + dynamic.p_filesz;
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      if (!read_at(file, at, &d) || d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_NEEDED) names.push_back(d.d_un.d_val);
      if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
      if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
    }
    std::size_t base = 0;
    if (!offset_of(strtab, &base) || base > file.size()) return needed;
    const std::size_t end = strsz && strsz < file.size() - base ? base + strsz : file.size();
    for (const Elf64_Xword n : names) {
      if (n >= end - base) continue;
      const char* s = file.data() + base + n;
      needed.emplace_back(s, strnlen(s, end - base - n));
    }
  } catch (...) {
    needed.clear();
  }
  return needed;
}

std::vector<std::string> elf_defined_symbols(const std::string& path) noexcept {
  std::vector<std::string> names;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return names;
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Elf64_Ehdr eh;
    if (!read_at(file, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr))
      return names;
    // The section headers: .dynsym (SHT_DYNSYM) and the string table it links to.
    for (unsigned i = 0; i < eh.e_shnum; ++i) {
      Elf64_Shdr sh, strings;
      if (!read_at(file, eh.e_shoff + std::size_t{i} * sizeof(Elf64_Shdr), &sh)) return names;
      if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
      if (sh.sh_link >= eh.e_shnum || !read_at(file, eh.e_shoff + std::size_t{sh.sh_link} * sizeof(Elf64_Shdr), &strings))
        return names;
      for (std::size_t at = sh.sh_offset; at + sizeof(Elf64_Sym) <= sh.sh_offset + sh.sh_size; at += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        if (!read_at(file, at, &sym)) return names;
        if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strings.sh_size) continue;
        const std::size_t from = strings.sh_offset + sym.st_name;
        if (from >= file.size()) continue;
        const std::size_t end = file.find('\0', from);
        if (end == std::string::npos || end > strings.sh_offset + strings.sh_size) continue;
        names.push_back(file.substr(from, end - from));
      }
      break;
    }
  } catch (...) {
    names.clear();
  }
  return names;
}

}  // namespace attrcheck::tools
