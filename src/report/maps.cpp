#include "report/maps.hpp"

#include <climits>
#include <cstring>

#include "attrcheck/proc_maps.hpp"

namespace attrcheck {

void modules_from_maps(const void* const* addresses, int n,
                       void (*found)(void* context, int i, const char* path, std::uint64_t offset),
                       void* context) noexcept {
  if (!addresses || n <= 0 || !found) return;
  struct Walk {
    const void* const* addresses;
    int n;
    void (*found)(void*, int, const char*, std::uint64_t);
    void* context;
    char base_path[PATH_MAX];  // the file whose first mapping (file offset 0) was seen last
    std::uintptr_t base;
  } walk{addresses, n, found, context, {}, 0};
  for_each_mapping([](void* c, const Mapping& m) {
    auto& w = *static_cast<Walk*>(c);
    if (m.path[0] != '/') return true;
    if (m.file_offset == 0) {
      const std::size_t len = std::strlen(m.path);
      if (len >= sizeof w.base_path) return true;
      std::memcpy(w.base_path, m.path, len + 1);
      w.base = m.start;
    }
    // A file's later mappings follow its first one; if not (never seen here), the offset is
    // computed from this mapping's own file offset, as the file's layout has it.
    const bool same_file = std::strcmp(w.base_path, m.path) == 0;
    for (int i = 0; i < w.n; ++i) {
      const auto a = reinterpret_cast<std::uintptr_t>(w.addresses[i]);
      if (a < m.start || a >= m.end) continue;
      w.found(w.context, i, m.path, same_file ? a - w.base : a - m.start + m.file_offset);
    }
    return true;
  }, &walk);
}

}  // namespace attrcheck
