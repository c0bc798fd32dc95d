// The shared libraries an ELF program names (DT_NEEDED), read from its file: the launcher picks
// the attrcheck build for the program it starts by them (libmpi_abi.so.1: the standard ABI build).
// And the symbols a library defines (the library probe asks a standard ABI library with them).
#pragma once

#include <string>
#include <vector>

namespace attrcheck::tools {

// The DT_NEEDED entries of the 64-bit little-endian ELF file at `path` ("libmpi_abi.so.1"), in
// order; empty if it is not one, has none, or cannot be read. Never throws on a malformed file.
std::vector<std::string> elf_needed(const std::string& path) noexcept;
// The names of the symbols the dynamic symbol table (.dynsym) of the ELF64 shared library at
// `path` defines; empty if it cannot be read. Never throws on a malformed file.
std::vector<std::string> elf_defined_symbols(const std::string& path) noexcept;

}  // namespace attrcheck::tools
