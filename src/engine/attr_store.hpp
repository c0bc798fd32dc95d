// AttrStore: where the engine keeps attribute values. An object's attributes live in an
// open-addressing table of records (engine_storage.hpp: AttrTable, AttrRec), tables are pooled by
// size and never freed while the engine lives, and a Fortran value also takes a cell that its C
// readers get a pointer to. Here: the record-level operations on those tables (probe, insert,
// grow, erase, mark dead, fill a value) and on the cells. It has no lock and no version of its
// own: Engine::Impl (engine_impl.hpp), which derives from it, calls them with its lock held and,
// where a comment says "inside a WriteSection", within one of its write sections, whose sequence
// counter is what lock-free readers validate against. Internal to src/engine/.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine_storage.hpp"

namespace attrcheck::engine_detail {

struct AttrStore {
  // Attribute tables, pooled by log2(capacity): a table is never freed while the engine lives.
  std::vector<AttrTable*> table_pool_[32];
  std::vector<std::unique_ptr<AttrTable>> all_tables_;

  // Fortran value cells.
  ChunkedArray<Cell, 10, 4096> cells_;
  std::uint32_t cell_count_ = 1;  // index 0 = none
  std::vector<std::uint32_t> free_cells_;
  std::size_t cells_in_use_ = 0;
  std::atomic<bool> fortran_values_{false};  // a cell was ever taken (Engine::fortran_values_flag)

  // ---- tables ------------------------------------------------------------------------------

  AttrTable* take_table(std::uint32_t log2cap) {
    auto& pool = table_pool_[log2cap];
    if (!pool.empty()) {
      AttrTable* t = pool.back();
      pool.pop_back();
      return t;
    }
    all_tables_.push_back(std::make_unique<AttrTable>(log2cap));
    return all_tables_.back().get();
  }

  // find_attr that also says where a miss would insert `key` (*empty: the free record its probe
  // ended on; nullptr without a table), so that a set of a new attribute probes once.
  [[gnu::always_inline]] static AttrRec* find_attr_or_empty(AttrTable* t, KeyvalId key, AttrRec** empty) noexcept {
    *empty = nullptr;
    if (!t) return nullptr;
    std::uint32_t i = t->home(key);
    for (std::uint32_t n = 0; n <= t->mask; ++n, i = (i + 1) & t->mask) {
      const KeyvalId k = t->recs[i].key.load(std::memory_order_relaxed);
      if (k == key) return &t->recs[i];
      if (k == kEmptyKey) {
        *empty = &t->recs[i];
        return nullptr;
      }
    }
    return nullptr;
  }
  // (The same probe; the unused miss position is optimised away once inlined.)
  [[gnu::always_inline]] static AttrRec* find_attr(AttrTable* t, KeyvalId key) noexcept {
    AttrRec* unused;
    return find_attr_or_empty(t, key, &unused);
  }

  // A free record for `key` in the object's table, growing it if needed (inside a WriteSection).
  // (The common case inline, growing out of line: an emulated set + delete ~25 instructions less,
  // callgrind.)
  [[gnu::always_inline]] AttrRec* insert_slot(ObjectSlot* o, KeyvalId key) {
    AttrTable* t = o->table.load(std::memory_order_relaxed);
    if (__builtin_expect(!t || (t->count + 1) * 4 > t->capacity() * 3, 0)) t = grow_table(o);
    ++t->count;
    return probe_empty(t, key);
  }
  // insert_slot's table for one more record: a new one, twice as large, if needed.
  [[gnu::noinline]] AttrTable* grow_table(ObjectSlot* o) {
    AttrTable* t = o->table.load(std::memory_order_relaxed);
    if (!t || (t->count + 1) * 4 > t->capacity() * 3) {
      const std::uint32_t log2cap = t ? 32 - t->shift + 1 : 2;
      AttrTable* bigger = take_table(log2cap);
      if (t) move_records(t, bigger);
      o->table.store(bigger, std::memory_order_release);
      o->records_changed();  // (the records moved)
      t = bigger;
    }
    return t;
  }

  // A table of ct's size with ct's attributes where lookups find them: ct's records sit in slots
  // they were not probed into (a dup's copies placed where the old object's records were, some
  // not copied) or among dead ones (what a free stopped by a failing callback left). ct goes
  // back to the pool.
  AttrTable* repack(AttrTable* ct) {
    AttrTable* packed = take_table(32 - ct->shift);
    move_records(ct, packed);
    return packed;
  }

  // Moves the attributes of `from` into the empty table `to`, each probed into place with its
  // cell, and gives `from` back to the pool, cleared (its dead records dropped).
  void move_records(AttrTable* from, AttrTable* to) {
    for (std::uint32_t i = 0; i <= from->mask; ++i) {
      AttrRec& rec = from->recs[i];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      if (key == kEmptyKey) continue;
      if (live_key(key)) probe_empty(to, key)->copy_from(rec);
      rec.clear();
    }
    to->count = from->count;
    from->count = 0;
    from->dead = 0;
    table_pool_[32 - from->shift].push_back(from);
  }

  static AttrRec* probe_empty(AttrTable* t, KeyvalId key) noexcept {
    std::uint32_t i = t->home(key);
    while (t->recs[i].key.load(std::memory_order_relaxed) != kEmptyKey) i = (i + 1) & t->mask;
    return &t->recs[i];
  }

  // Removes a record (inside a WriteSection), with backward-shift deletion. (Inline, a Fortran
  // value's cell released out of line: an emulated set + delete ~20 instructions less, callgrind.)
  [[gnu::always_inline]] void erase_attr(ObjectSlot* o, AttrRec* rec) {
    AttrTable* t = o->table.load(std::memory_order_relaxed);
    o->records_changed();
    if (__builtin_expect(rec->cell() != 0, 0)) release_cell_out_of_line(*rec);
    std::uint32_t hole = static_cast<std::uint32_t>(rec - t->recs.get());
    std::uint32_t j = hole;
    for (;;) {
      j = (j + 1) & t->mask;
      const KeyvalId kj = t->recs[j].key.load(std::memory_order_relaxed);
      if (kj == kEmptyKey) break;
      const std::uint32_t k = t->home(kj);
      const bool stays = (hole <= j) ? (hole < k && k <= j) : (hole < k || k <= j);
      if (stays) continue;
      t->recs[hole].copy_from(t->recs[j]);
      hole = j;
    }
    t->recs[hole].clear();
    --t->count;
  }

  // kill_attr's change (inside its write section).
  static void mark_dead(ObjectSlot* o, AttrTable* t, AttrRec* rec) noexcept {
    rec->key.store(kDeadKey, std::memory_order_relaxed);
    --t->count;
    ++t->dead;
    o->records_changed();  // (a dup from one of the free's callbacks may have made the list again)
  }

  // ---- values and cells --------------------------------------------------------------------

  Cell* cell_at(std::uint32_t index) const noexcept { return index ? cells_.find(index) : nullptr; }

  // Stores value/repr into a record (inside a WriteSection), allocating a cell for Fortran reprs.
  // The record becomes the object's newest.
  bool fill(ObjectSlot* o, AttrRec* rec, KeyvalId key, Binding repr, std::uint64_t word, bool predefined,
            Origin origin) {
    std::uint32_t cell = 0;
    if (repr != Binding::C) {
      if (!free_cells_.empty()) {
        cell = free_cells_.back();
        free_cells_.pop_back();
      } else {
        if (cell_count_ >= decltype(cells_)::kCapacity) return false;
        cell = cell_count_++;
      }
      if (__builtin_expect(!fortran_values_.load(std::memory_order_relaxed), 0))
        fortran_values_.store(true, std::memory_order_release);
      Cell* c = cells_.get(cell);
      c->aint.store(static_cast<std::int64_t>(word), std::memory_order_relaxed);
      c->low.store(static_cast<std::int32_t>(word), std::memory_order_relaxed);
      ++cells_in_use_;
    }
    rec->key.store(key, std::memory_order_relaxed);
    store_value(o, rec, static_cast<std::uint32_t>(repr) | (predefined ? kMetaPredefined : 0u) | (cell << kMetaCellShift),
                word, origin);
    return true;
  }

  // The part of fill() after the cell (inside a WriteSection).
  static void store_value(ObjectSlot* o, AttrRec* rec, std::uint32_t meta, std::uint64_t word, Origin origin) {
    rec->meta.store(meta, std::memory_order_relaxed);
    rec->value.store(word, std::memory_order_relaxed);
    rec->set_at = origin;
    if (__builtin_expect(o->next_order == UINT32_MAX, 0)) renumber(o);
    rec->order = o->next_order++;
    o->records_changed();
  }

  // After 2^32 sets on one object: renumber its attributes 1..n, keeping their order.
  static void renumber(ObjectSlot* o) {
    AttrTable* t = o->table.load(std::memory_order_relaxed);
    std::vector<AttrRec*> recs;
    for (std::uint32_t i = 0; i <= t->mask; ++i)
      if (t->recs[i].key.load(std::memory_order_relaxed) != kEmptyKey) recs.push_back(&t->recs[i]);
    std::sort(recs.begin(), recs.end(), [](const AttrRec* a, const AttrRec* b) { return a->order < b->order; });
    o->next_order = 1;
    for (AttrRec* r : recs) r->order = o->next_order++;
  }

  [[gnu::noinline]] void release_cell_out_of_line(AttrRec& rec) { release_cell(rec); }
  void release_cell(AttrRec& rec) {
    const std::uint32_t cell = rec.cell();
    if (!cell) return;
    free_cells_.push_back(cell);
    --cells_in_use_;
    rec.meta.store(rec.meta.load(std::memory_order_relaxed) & ((1u << kMetaCellShift) - 1),
                   std::memory_order_relaxed);
  }

  static Binding repr_of(const AttrRec& rec) noexcept {
    return static_cast<Binding>(rec.meta.load(std::memory_order_relaxed) & kMetaReprMask);
  }
  static bool predefined_rec(const AttrRec& rec) noexcept {
    return rec.meta.load(std::memory_order_relaxed) & kMetaPredefined;
  }
};

}  // namespace attrcheck::engine_detail
