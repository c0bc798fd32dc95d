#include "attrcheck/proc_maps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>

namespace attrcheck {

namespace {

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

// "start-end perms offset dev inode   path": false for a line that is not one.
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

bool for_each_mapping(bool (*visit)(void* context, const Mapping& m), void* context) noexcept {
  const int saved_errno = errno;
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved_errno;
    return false;
  }
  char chunk[4096];
  char line[PATH_MAX + 256];
  std::size_t used = 0;
  bool overlong = false, more = true;
  while (more) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    for (ssize_t k = 0; k < got && more; ++k) {
      const char c = chunk[k];
      if (c == '\n') {
        line[used] = '\0';
        Mapping m;
        if (!overlong && parse(line, m)) more = visit(context, m);
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
  errno = saved_errno;
  return true;
}

}  // namespace attrcheck
