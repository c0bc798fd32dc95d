#include "report/maps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace attrcheck {

namespace {

// "start-end perms offset dev inode   path": false for a line that is not one.
struct Mapping {
  std::uintptr_t start = 0, end = 0;
  std::uint64_t file_offset = 0;
  const char* path = "";  // into the line; empty for anonymous memory
};

bool hex_field(const char*& p, std::uint64_t& out) noexcept {
  const char* begin = p;
  out = 0;
  for (;; ++p) {
    const char c = *p;
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) break;
    out = out << 4 | static_cast<std::uint64_t>(digit);
  }
  return p != begin;
}

void skip_field(const char*& p) noexcept {
  while (*p && *p != ' ') ++p;
  while (*p == ' ') ++p;
}

bool parse(const char* line, Mapping& m) noexcept {
  const char* p = line;
  std::uint64_t start, end, offset;
  if (!hex_field(p, start) || *p++ != '-' || !hex_field(p, end) || *p != ' ') return false;
  while (*p == ' ') ++p;
  skip_field(p);  // perms
  if (!hex_field(p, offset)) return false;
  while (*p == ' ') ++p;
  skip_field(p);  // dev
  skip_field(p);  // inode
  m.start = static_cast<std::uintptr_t>(start);
  m.end = static_cast<std::uintptr_t>(end);
  m.file_offset = offset;
  m.path = p;
  return true;
}

}  // namespace

void modules_from_maps(const void* const* addresses, int n,
                       void (*found)(void* context, int i, const char* path, std::uint64_t offset),
                       void* context) noexcept {
  if (!addresses || n <= 0 || !found) return;
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char chunk[4096];
  char line[PATH_MAX + 256];
  char base_path[PATH_MAX];  // the file whose first mapping (file offset 0) was seen last
  std::uintptr_t base = 0;
  base_path[0] = '\0';
  std::size_t used = 0;
  bool overlong = false;
  auto on_line = [&] {
    Mapping m;
    if (!parse(line, m) || m.path[0] != '/') return;
    if (m.file_offset == 0) {
      const std::size_t len = std::strlen(m.path);
      if (len >= sizeof base_path) return;
      std::memcpy(base_path, m.path, len + 1);
      base = m.start;
    }
    // A file's later mappings follow its first one; if not (never seen here), the offset is
    // computed from this mapping's own file offset, as the file's layout has it.
    const bool same_file = std::strcmp(base_path, m.path) == 0;
    for (int i = 0; i < n; ++i) {
      const auto a = reinterpret_cast<std::uintptr_t>(addresses[i]);
      if (a < m.start || a >= m.end) continue;
      found(context, i, m.path, same_file ? a - base : a - m.start + m.file_offset);
    }
  };
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    for (ssize_t k = 0; k < got; ++k) {
      const char c = chunk[k];
      if (c == '\n') {
        line[used] = '\0';
        if (!overlong) on_line();
        used = 0;
        overlong = false;
      } else if (used + 1 < sizeof line) {
        line[used++] = c;
      } else {
        overlong = true;
      }
    }
  }
  ::close(fd);
}

}  // namespace attrcheck
