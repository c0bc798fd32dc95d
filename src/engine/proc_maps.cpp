#include "attrcheck/proc_maps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>

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

// A line is parsed where it lies in the chunk read (its newline made its end); only a line split
// between two reads is gathered in `line`. (Against copying every character into `line`: the
// first stack walk of a thread, which reads the maps to find its stack, ~870k -> ~270k
// instructions with MPICH's 439 mappings, callgrind.)
bool for_each_mapping_in(int fd, bool (*visit)(void* context, const Mapping& m), void* context) noexcept {
  char chunk[4096];
  char line[PATH_MAX + 256];
  std::size_t used = 0;  // characters of a split line gathered in `line`
  bool split = false;    // a line begun in an earlier read
  bool overlong = false, more = true;
  auto visit_line = [&](char* text) {
    Mapping m;
    if (!overlong && parse(text, m)) more = visit(context, m);
    used = 0;
    split = overlong = false;
  };
  while (more) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    char* p = chunk;
    char* const end = chunk + got;
    while (more && p < end) {
      char* nl = static_cast<char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));  // (pure: no lock, no state)
      if (!nl) nl = end;
      const std::size_t n = static_cast<std::size_t>(nl - p);
      if (nl != end && !split) {  // a whole line in the chunk
        *nl = '\0';  // (a chunk is shorter than `line`: never overlong)
        visit_line(p);
      } else {  // the start or the rest of a split line
        if (used + n + 1 <= sizeof line) {
          for (std::size_t i = 0; i < n; ++i) line[used + i] = p[i];
          used += n;
        } else {
          overlong = true;
        }
        split = true;
        if (nl != end) {
          line[used] = '\0';
          visit_line(line);
        }
      }
      p = nl + 1;
    }
  }
  return true;
}

bool for_each_mapping(bool (*visit)(void* context, const Mapping& m), void* context) noexcept {
  const int saved_errno = errno;
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    errno = saved_errno;
    return false;
  }
  for_each_mapping_in(fd, visit, context);
  ::close(fd);
  errno = saved_errno;
  return true;
}

}  // namespace attrcheck
