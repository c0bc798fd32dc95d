// The shared libraries an ELF program names (DT_NEEDED), read from its file: the launcher picks
// the attrcheck build for the program it starts by them (libmpi_abi.so.1: the standard ABI build).
#pragma once

#include <string>
#include <vector>

namespace attrcheck::tools {

// The DT_NEEDED entries of the 64-bit little-endian ELF file at `path` ("libmpi_abi.so.1"), in
// order; empty if it is not one, has none, or cannot be read. Never throws on a malformed file.
std::vector<std::string> elf_needed(const std::string& path) noexcept;

}  // namespace attrcheck::tools
