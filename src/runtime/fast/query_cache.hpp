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
  // A query's keyval as its tag and its set's hash hold it: times kKeyMul (odd, so invertible:
  // kKeyInverse undoes it).
  static constexpr std::uint32_t kKeyMul = 0x9E3779B1u, kKeyInverse = 0x0E8B2F51u;
  static_assert(kKeyMul * kKeyInverse == 1u, "kKeyInverse is kKeyMul's inverse mod 2^32");
  static std::uint32_t key_word(int key) noexcept { return static_cast<std::uint32_t>(key) * kKeyMul; }
  // key_word(key), zero-extended, as the lookup compares it with an entry's tag. (Made by a 32-bit
  // imul written out, which zero-extends its result: from the C++ product gcc made the product,
  // then moved it to another register to zero-extend it, one instruction more on every lookup.)
  static std::uint64_t key_tag(int key) noexcept {
#if defined(__x86_64__)
    std::uint64_t w;
    __asm__("imull %2, %k1, %k0" : "=r"(w) : "r"(key), "i"(static_cast<std::int32_t>(kKeyMul)));
    return w;
#else
    return key_word(key);
#endif
  }

  // One cache line.
  struct alignas(64) Entry {
    Handle object = 0;
    std::uint64_t query = 0;    // the keyval (times kKeyMul), kind and binding (query_tag)
    std::uint64_t version = 0;  // the engine version the answer was read at (even); kNoAnswer: none
    std::uint64_t word = 0;     // the answer's value, as the binding reads it (low bytes)
    // cursor.layout: the stamp the query was found valid at. A query also found valid for a set
    // keeps the engine's cursor for it (Engine::set_attr_ran), which holds at the same stamp.
    SetCursor cursor;
    int engine_key = 0;
    std::int16_t flag = 0;      // the answer's flag (0 or 1)
    // A set of this query that the engine has not applied yet (the runtime's deferred sets,
    // fast/pending_sets.hpp): its record's index + 1; 0: none. The answer is then that set's.
    std::uint8_t pending = 0;
    bool user_delete = false;   // with a cursor: replacing a value runs a user delete callback

    std::uint64_t layout() const noexcept { return cursor.layout; }

    int key() const noexcept { return key_of(query); }
    // Whether the entry's keyval is `key` (its kind and binding aside).
    bool has_key(int key) const noexcept { return static_cast<std::uint32_t>(query) == key_word(key); }
    ObjectKind kind() const noexcept { return static_cast<ObjectKind>((query >> 34) & 3); }
    Binding binding() const noexcept { return static_cast<Binding>((query >> 32) & 3); }
  };

  // An entry's `query` for (kind, b, key), as lookup() compares it (key_of undoes it).
  static std::uint64_t tag(ObjectKind kind, Binding b, int key) noexcept { return query_tag_of(kind, b, key_tag(key)); }
  static int key_of(std::uint64_t query) noexcept {
    return static_cast<int>(static_cast<std::uint32_t>(query) * kKeyInverse);
  }

  // Whether `e` holds the query (kind, b, h, key), whatever its stamps.
  static bool holds(const Entry& e, ObjectKind kind, Binding b, Handle h, int key) noexcept {
    return e.object == h && e.query == query_tag_of(kind, b, key_tag(key));
  }

  // The entry for a query, whatever its stamps, or nullptr.
  Entry* lookup(ObjectKind kind, Binding b, Handle h, int key) noexcept {
    // (No register forced for the set's address any more, as one was while the cache was a
    // thread-local of its own, which gcc otherwise addressed twice: in the thread-local block gcc
    // forms it with one lea into the register the entry stays in, one instruction less.)
    const std::uint64_t tag = query_tag_of(kind, b, key_tag(key));
    Entry* set = set_of_word(h, static_cast<std::uint32_t>(tag));
    if (__builtin_expect(set[0].object == h && set[0].query == tag, 1)) return &set[0];
    if (set[1].object == h && set[1].query == tag) return &set[1];
    return nullptr;
  }

  // The entry for a query found valid at `layout`, or nullptr.
  Entry* find(ObjectKind kind, Binding b, Handle h, int key, std::uint64_t layout) noexcept {
    Entry* e = lookup(kind, b, h, key);
    return e && e->layout() == layout ? e : nullptr;
  }

  // Records a query found valid at `layout` (a stamp read before the check began), without an
  // answer. It goes first in its set; the other entry moves down (unless it is this query).
  // No entry may hold a pending set (they would move or go).
  Entry& remember(ObjectKind kind, Binding b, Handle h, int key, int engine_key, std::uint64_t layout) noexcept {
    const std::uint64_t tag = query_tag(kind, b, key);
    Entry* set = set_of(h, key);
    if (!(set[0].object == h && set[0].query == tag)) set[1] = set[0];
    Entry& e = set[0];
    e.object = h;
    e.query = tag;
    e.cursor = SetCursor{layout, nullptr, nullptr};
    e.version = kNoAnswer;
    e.word = 0;
    e.engine_key = engine_key;
    e.flag = 0;
    e.pending = 0;
    e.user_delete = false;
    return e;
  }

  // Stores a get's answer read while the engine version was `version` (read before the get).
  // An odd version (a change was under way, MPI_THREAD_MULTIPLE) stores nothing and answers
  // false: the entry then holds no answer, and a caller about to read it must not.
  static bool remember_answer(Entry& e, std::uint64_t version, std::uint64_t word, int flag) noexcept {
    if (version & 1) return false;
    e.version = version;
    e.word = word;
    e.flag = flag != 0 ? 1 : 0;
    return true;
  }

  static bool has_answer(const Entry& e, std::uint64_t version) noexcept { return e.version == version; }

  // Whether an entry for the same object and keyval in another binding holds a pending set.
  // (e: an entry of this cache.)
  static bool other_pending(const Entry& e) noexcept {
    const Entry& x = other_way(e);
    return other_binding(x, e) && x.pending;
  }

  // Drops the answers of the entries for the same object and keyval in other bindings (their
  // answers change with e's). (e: an entry of this cache.)
  // (always_inline: on the path of every first deferred set; gcc stopped inlining it when the
  // set wrappers' functions grew.)
  [[gnu::always_inline]] static void drop_other_answers(const Entry& e) noexcept {
    Entry& x = other_way(e);
    if (other_binding(x, e)) x.version = kNoAnswer;
  }

 private:
  static_assert(kWays == 2, "find() and remember() spell out two ways");
  static_assert(sizeof(Entry) == 64, "an entry is one cache line");
  // The other entry of e's set: sets are aligned to their size, so it is e's address with the
  // entry-size bit flipped (no hashing again: the entries of one object and keyval in all its
  // bindings share a set, which hashes the object and keyval only).
  static Entry& other_way(const Entry& e) noexcept {
    return *reinterpret_cast<Entry*>(reinterpret_cast<std::uintptr_t>(&e) ^ sizeof(Entry));
  }
  // Whether `x` is the query of `e` in another binding (same object, kind and keyval): such
  // entries share e's set, which hashes the object and keyval only.
  static bool other_binding(const Entry& x, const Entry& e) noexcept {
    // (No test that x is filled: an empty entry's object is 0, and e's, a query found valid, is a
    // live object's handle, which no library makes 0.)
    return &x != &e && x.object == e.object && ((x.query ^ e.query) & ~(std::uint64_t{3} << 32)) == 0;
  }
  // The keyval in the low half (times kKeyMul, as set_of hashes it: the lookup compares the tag
  // with the product it hashed, already zero-extended, where the keyval itself took a move more
  // on every lookup; the multiplication is invertible, so the tag still names the keyval), the
  // kind and binding in the high one. For a C call on a communicator the high half is 0: the
  // wrappers build the tag with the hash's multiplication. An empty entry (all zeros) then holds
  // the query (handle 0, C, communicator, keyval 0), which no correct call makes (no library's
  // handle is 0), and if one did, the entry
  // would still answer nothing: its layout stamp 0 is no layout_version() (which starts at 1),
  // and its version 0 is behind the engine's by the time the cache is read (a thread reads it once
  // a call has found MPI running, and MPI_Init's registrations of MPI_COMM_WORLD, MPI_COMM_SELF
  // and the predefined keyvals moved the version). No entry holding an answer, a cursor or a
  // pending set is that query (each was found valid: a live object's handle, never 0).
  static std::uint64_t query_tag(ObjectKind kind, Binding b, int key) noexcept {
    return query_tag_of(kind, b, key_word(key));
  }
  // (`tag`: key_word's, zero-extended.)
  static std::uint64_t query_tag_of(ObjectKind kind, Binding b, std::uint64_t tag) noexcept {
    const std::uint64_t high = (static_cast<std::uint32_t>(kind) << 2) | static_cast<std::uint32_t>(b);
    return (high << 32) | tag;
  }
  // The keyval's multiple is added, not mixed in any other way: for one object, consecutive keyvals
  // then land on a Weyl sequence of sets (k * K1 * K2), spread evenly whatever the handle is, so a
  // program's keyvals on one object do not pile up three in a set, or do so in every run alike
  // (a xor here made that depend on where the object happened to be allocated). The second
  // multiplication carries every bit into the top ones, which pick the set. The handle's upper 32
  // bits are left out: a collision costs a miss, never a wrong answer (the entry holds the query).
  Entry* set_of(Handle h, int key) noexcept { return set_of_word(h, key_word(key)); }
  Entry* set_of_word(Handle h, std::uint32_t key_word) noexcept {
    const std::uint32_t x = static_cast<std::uint32_t>(h) + key_word;
    return sets_[(x * 0x85EBCA6Bu) >> (32 - kSetBits)];
  }

  alignas(kWays * sizeof(Entry)) Entry sets_[1u << kSetBits][kWays];
};

}  // namespace attrcheck::rt
