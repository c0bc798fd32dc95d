// The base each window's constructor returned, and the answer to MPI_WIN_BASE (window_base.hpp).
#include "runtime/hooks/window_base.hpp"

#include <cstring>
#include <mutex>

namespace attrcheck::rt {

namespace {

struct Base {
  Handle win;
  const void* base;
};

// Windows are few (each one a collective call and, in most libraries, memory registered with
// the network); past this many live ones the oldest's base is forgotten and its MPI_WIN_BASE is
// then the library's, unchecked.
constexpr int kCapacity = 256;
struct Table {
  std::mutex mutex;
  Base bases[kCapacity];
  int count = 0;
};

Table& table() noexcept {
  static Table t;
  return t;
}

}  // namespace

void note_window_base(Handle win, const void* base) noexcept {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (int i = 0; i < t.count; ++i)
    if (t.bases[i].win == win) {  // a handle the library reused (its free was not seen)
      t.bases[i].base = base;
      return;
    }
  if (t.count == kCapacity) {
    for (int i = 1; i < kCapacity; ++i) t.bases[i - 1] = t.bases[i];
    --t.count;
  }
  t.bases[t.count++] = Base{win, base};
}

void forget_window_base(Handle win) noexcept {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (int i = 0; i < t.count; ++i)
    if (t.bases[i].win == win) {
      t.bases[i] = t.bases[--t.count];
      return;
    }
}

void check_window_base(const Call& call, Handle win, void* value_out, const int* flag) noexcept {
  const void* base = nullptr;
  {
    Table& t = table();
    std::lock_guard<std::mutex> lock(t.mutex);
    int i = 0;
    while (i < t.count && t.bases[i].win != win) ++i;
    if (i == t.count) return;  // not made by a constructor that returns its base
    base = t.bases[i].base;
  }
  if (!value_out || !flag || !*flag) return;
  void* answer = nullptr;
  std::memcpy(&answer, value_out, sizeof answer);
  if (answer == base) return;
  if (state().mode == Mode::Emulate) {
    const void* standard = base;
    std::memcpy(value_out, &standard, sizeof standard);
    return;
  }
  char d[160];
  Appender a{d, sizeof d};
  a.put("answered MPI_WIN_BASE ");
  a.hex(reinterpret_cast<std::uintptr_t>(answer));
  a.put(" where the window's constructor returned base ");
  a.hex(reinterpret_cast<std::uintptr_t>(base));
  divergence(call, d, false, 0, DivergenceSite::WindowBase);
}

}  // namespace attrcheck::rt
