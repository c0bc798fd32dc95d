// The hooks' per-thread memo of attribute queries (kind, binding, object, keyval): that the query
// was found valid, the engine keyval it maps to, and the engine's answer to a get of it.
//
// Entries are stamped with the versions they were read at and are only believed while those
// versions still read the same (docs/engine.md, "Versions"):
//   - `layout`: Engine::layout_version() (which the runtime also advances when it remaps a library
//     keyval, and when MPI opens and closes). While it reads the same, no keyval or object came
//     or went, so the query is still valid and still maps to the same engine keyval: set, delete
//     and get skip their checks.
//   - `version`: Engine::version() when the answer was read (after `layout`, before the check).
//     While it reads the same, nothing a get can observe changed, so the stored answer is the
//     engine's answer; and since every layout change is a version change, the query is valid.
// Every call is still checked: a hit stands for the full check with the same outcome, and the
// shadow cross-check still compares each library answer with the model's. No MPI in here.
#pragma once

#include <cstdint>

#include "attrcheck/engine.hpp"

namespace attrcheck::rt {

class QueryCache {
 public:
  static constexpr unsigned kSetBits = 8;  // 256 sets of 2 entries
  static constexpr int kWays = 2;
  static constexpr unsigned kEntries = (1u << kSetBits) * kWays;
  // An entry's version when it holds no answer: odd, so no answer is ever stored with it, and
  // out of reach, so no version read from the engine (even an odd one, mid-change) equals it.
  static constexpr std::uint64_t kNoAnswer = ~0ULL;

  struct Entry {
    Handle object;
    std::uint64_t query;    // the keyval, kind and binding (query_tag); 0: empty
    std::uint64_t layout;   // the stamp it was found valid at
    std::uint64_t version;  // the engine version the answer was read at (even); kNoAnswer: none
    std::uint64_t word;     // the answer's value, as the binding reads it (low bytes)
    int engine_key;
    int flag;               // the answer's flag (0 or 1)

    int key() const noexcept { return static_cast<int>(static_cast<std::uint32_t>(query >> 8)); }
    ObjectKind kind() const noexcept { return static_cast<ObjectKind>((query >> 2) & 3); }
    Binding binding() const noexcept { return static_cast<Binding>(query & 3); }
  };

  // The entry for a query, whatever its stamps, or nullptr.
  Entry* lookup(ObjectKind kind, Binding b, Handle h, int key) noexcept {
    const std::uint64_t tag = query_tag(kind, b, key);
    Entry* set = set_of(h, key);
    if (set[0].object == h && set[0].query == tag) return &set[0];
    if (set[1].object == h && set[1].query == tag) return &set[1];
    return nullptr;
  }

  // The entry for a query found valid at `layout`, or nullptr.
  Entry* find(ObjectKind kind, Binding b, Handle h, int key, std::uint64_t layout) noexcept {
    Entry* e = lookup(kind, b, h, key);
    return e && e->layout == layout ? e : nullptr;
  }

  // Records a query found valid at `layout` (a stamp read before the check began), without an
  // answer. It goes first in its set; the other entry moves down (unless it is this query).
  Entry& remember(ObjectKind kind, Binding b, Handle h, int key, int engine_key, std::uint64_t layout) noexcept {
    const std::uint64_t tag = query_tag(kind, b, key);
    Entry* set = set_of(h, key);
    if (!(set[0].object == h && set[0].query == tag)) set[1] = set[0];
    Entry& e = set[0];
    e.object = h;
    e.query = tag;
    e.layout = layout;
    e.version = kNoAnswer;
    e.word = 0;
    e.engine_key = engine_key;
    e.flag = 0;
    return e;
  }

  // Stores a get's answer read while the engine version was `version` (read before the get).
  // An odd version (a change was under way) stores nothing.
  static void remember_answer(Entry& e, std::uint64_t version, std::uint64_t word, int flag) noexcept {
    if (version & 1) return;
    e.version = version;
    e.word = word;
    e.flag = flag != 0;
  }

  static bool has_answer(const Entry& e, std::uint64_t version) noexcept { return e.version == version; }

 private:
  static_assert(kWays == 2, "find() and remember() spell out two ways");
  // Never 0 (bit 63), so an empty entry matches no query.
  static std::uint64_t query_tag(ObjectKind kind, Binding b, int key) noexcept {
    return (1ULL << 63) | (static_cast<std::uint64_t>(static_cast<std::uint32_t>(key)) << 8) |
           (static_cast<std::uint64_t>(kind) << 2) | static_cast<std::uint64_t>(b);
  }
  Entry* set_of(Handle h, int key) noexcept {
    const std::uint32_t x = (static_cast<std::uint32_t>(h ^ (h >> 29)) >> 3) + static_cast<std::uint32_t>(key) * 0x9E3779B1u;
    return &entries_[((x * 0x85EBCA6Bu) >> (32 - kSetBits)) * kWays];
  }

  Entry entries_[kEntries];
};

}  // namespace attrcheck::rt
