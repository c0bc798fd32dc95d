// The engine's dup and free without callbacks to call: for a host whose other cache already ran
// them (Engine::dup_object_ran, Engine::free_object_ran: the runtime's shadow mode), and for
// objects none of whose attributes has a user callback (dup_object, free_object). The runs are
// matched to the attributes in one pass over the runs (one table probe each), checked in one pass
// over the object's table, and the copy is built (or the object dropped) in one more: nothing is
// called, the lock is never released, no keyval is pinned, the dup's records go in under one
// write section (where every attribute is copied, in one pass, each into the same slot of a table
// of the same size: no probing) and a free drops the whole table at once. Anything but the plain case answers
// false with nothing changed, and the caller goes the general way (dup_object / free_object, and
// in shadow mode the replay, which reports what differs). (MPICH, shadow, 64 attributes with user
// callbacks: the replayed dup + free cost ~110k instructions of which ~75k per-attribute replay;
// callgrind.)
// An object whose dup went the plain way keeps a plan of it (ObjectSlot::flat_plan; with runs, a
// run plan: the runs' records in the order the library ran them), which the next dup whose runs
// follow it, and the frees of the copies, which get it, take instead of matching and walking:
// dup_flat / dup_runs, runs_as_planned + free_flat. (MPICH shadow dup + free [user], 64
// attributes: the mirror ~12.8k -> ~4.4k instructions, callgrind.)
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "engine_impl.hpp"

namespace attrcheck {

namespace {
// Per-slot codes besides a run's index: no run / not copied, and (dup) copied as it is.
constexpr std::uint32_t kNoRun = UINT32_MAX;
constexpr std::uint32_t kCopyAsIs = UINT32_MAX - 1;

// A run's keyval and rc read as one word, to compare with {key, 0} (a run of that key that
// succeeded), as ran_as_expected reads an Observation's: ~3 instructions a run fewer.
template <typename Run>
std::uint64_t key_and_rc(const Run& r) noexcept {
  static_assert(offsetof(Run, rc) == offsetof(Run, keyval) + sizeof(int), "read as one word");
  std::uint64_t word;
  std::memcpy(&word, &r.keyval, sizeof word);
  return word;
}
}  // namespace

std::uint32_t* Engine::Impl::slot_codes(std::uint32_t capacity) {
  if (codes_.size() < capacity) codes_.resize(capacity);
  return codes_.data();
}

template <typename Run>
bool Engine::Impl::match_runs(const AttrTable* t, const Run* ran, std::size_t n, std::uint32_t* run_of) {
  if (n == 0) return true;
  if (!t || n >= kCopyAsIs) return false;
  std::fill(run_of, run_of + t->capacity(), kNoRun);
  AttrTable* table = const_cast<AttrTable*>(t);  // (find_attr changes nothing)
  for (std::size_t j = 0; j < n; ++j) {
    const AttrRec* rec = find_attr(table, ran[j].keyval);
    if (!rec) return false;  // a callback for an attribute the object does not hold
    std::uint32_t& run = run_of[rec - t->recs.get()];
    if (run != kNoRun) return false;  // run twice
    run = static_cast<std::uint32_t>(j);
  }
  return true;
}

// The usual dup in one pass: every attribute is copied, as a C value. Each copy goes into the same
// slot of `ct` (a clean table of t's size that no object holds yet): the probe sequences stay as
// they are. kCopied: done; kSomeNotCopied: an attribute is not copied, or is a Fortran value (ct
// clean again: the two passes of dup_plain do it); kNotPlain: not the plain case (ct clean again).
// kRuns: `ran` / `run_of` hold the copy callbacks run elsewhere (else there are none). The common
// record, a user keyval's C value (meta 0), is tested first and alone: a predefined attribute or a
// Fortran value goes the longer way. (MPICH shadow dup of 64 attributes: ~25 instructions an
// attribute less than the two passes; with the common record first and no run lookups without
// runs, ~56 -> ~30 an attribute, emulate [pre], callgrind.)
enum SameSlots { kCopied, kSomeNotCopied, kNotPlain };
template <bool kRuns>
int Engine::Impl::copy_same_slots(const AttrTable* t, AttrTable* ct, const RanCopy* ran,
                                  const std::uint32_t* run_of, std::uint32_t n, Origin origin, FlatStep* flat,
                                  bool* flat_free) {
  const AttrRec* const src = t->recs.get();
  AttrRec* const out = ct->recs.get();
  const std::uint32_t capacity = t->capacity();
  int verdict = kCopied;
  std::uint32_t i = 0, n_flat = 0;
  bool free_ok = true;
  for (; i < capacity; ++i) {
    const AttrRec& rec = src[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (key == kEmptyKey) continue;
    const std::uint32_t meta = rec.meta.load(std::memory_order_relaxed);
    const std::uint32_t run = kRuns ? run_of[i] : kNoRun;
    std::uint64_t word = rec.value.load(std::memory_order_relaxed);
    KeyvalSlot* k = nullptr;
    if (__builtin_expect(meta == static_cast<std::uint32_t>(Binding::C), 1)) {  // a user keyval's C value
      k = slot_of(key);
      const CopyAction action = k ? k->spec.copy.action : CopyAction::User;
      if (action == CopyAction::User) {
        if (!kRuns || !k || run == kNoRun || k->spec.lang != Binding::C) {
          verdict = kNotPlain;
          break;
        }
        const RanCopy& r = ran[run];
        if (r.rc != 0 || (r.flag != 0 && r.flag != 1) || r.value_in != word) {
          verdict = kNotPlain;
          break;
        }
        if (r.flag == 0) {
          verdict = kSomeNotCopied;
          break;
        }
        word = r.value_out;
      } else if (run != kNoRun) {
        verdict = kNotPlain;  // a run for an attribute without a copy callback
        break;
      } else if (action != CopyAction::Dup) {
        verdict = kSomeNotCopied;
        break;
      }
      ++k->attributes;
    } else {
      // A predefined attribute (copied as it is if its keyval says so), or a Fortran value.
      const bool predefined = meta & kMetaPredefined;
      k = predefined ? nullptr : slot_of(key);
      if (run != kNoRun || (!predefined && (!k || k->spec.copy.action == CopyAction::User))) {
        verdict = kNotPlain;
        break;
      }
      const PredefinedKeyval* p = predefined ? find_predefined(key) : nullptr;
      if (!predefined || !p || !p->copy_on_dup || (meta & kMetaReprMask) != static_cast<std::uint32_t>(Binding::C)) {
        verdict = kSomeNotCopied;
        break;
      }
    }
    AttrRec& dst = out[i];
    dst.key.store(key, std::memory_order_relaxed);
    dst.meta.store(meta, std::memory_order_relaxed);  // (C, maybe predefined: no cell)
    dst.value.store(word, std::memory_order_relaxed);
    dst.set_at = origin;
    dst.order = rec.order;  // the copy keeps the set order (the caller copies next_order)
    // The plan: a run's step where the run is (the library's order), the others after the runs.
    flat[run != kNoRun ? run : n + n_flat++] = FlatStep{k, i, key};
    free_ok = free_ok && (k && k->spec.del.action == DeleteAction::User) == (run != kNoRun);
  }
  if (verdict == kCopied) {
    ct->count = t->count;
    *flat_free = free_ok;
    return verdict;
  }
  for (std::uint32_t j = 0; j < i; ++j) {  // undo (the old object still holds every keyval)
    AttrRec& dst = out[j];
    const KeyvalId key = dst.key.load(std::memory_order_relaxed);
    if (key == kEmptyKey) continue;
    if (!predefined_rec(dst)) --slot_of(key)->attributes;
    dst.clear();
  }
  return verdict;
}

bool Engine::Impl::dup_plain(ObjectKind kind, ObjectSlot* old, Handle new_h, const RanCopy* ran, std::size_t n,
                             Origin origin) {
  const AttrTable* t = old->table.load(std::memory_order_relaxed);
  if (old->flat_plan_ok && n == old->flat_runs) {
    if (n == 0) return dup_flat(kind, old, t, new_h, origin);
    if (dup_runs(kind, old, t, new_h, ran, n, origin)) return true;
  }
  std::uint32_t* code = t ? slot_codes(t->capacity()) : nullptr;
  if (!match_runs(t, ran, n, code)) return false;
  if (t && t->count) {
    AttrTable* ct = take_table(32 - t->shift);
    // The object's flat plan (with runs, its run plan) is written on the way: the copy is made
    // through it from the next dup on, and both objects are freed through it. (A plan the runs
    // did not follow is written again: dropped first, so that a dup that stops half way leaves
    // none.)
    old->flat_plan_ok = false;
    if (old->flat_plan.size() < t->count) old->flat_plan.resize(t->count);
    bool flat_free = false;
    const int verdict =
        n ? copy_same_slots<true>(t, ct, ran, code, static_cast<std::uint32_t>(n), origin, old->flat_plan.data(), &flat_free)
          : copy_same_slots<false>(t, ct, ran, code, 0, origin, old->flat_plan.data(), &flat_free);
    const std::uint32_t new_slot = verdict == kCopied ? register_object(kind, new_h, kObjectNone, origin) : UINT32_MAX;
    if (new_slot != UINT32_MAX) {
      ObjectSlot* fresh = objects_.get(new_slot);
      old->flat_plan_ok = true;
      old->flat_runs = static_cast<std::uint32_t>(n);
      old->flat_free = flat_free;
      give_flat_plan(old, fresh, t->count);
      WriteSection ws(seq_);
      fresh->table.store(ct, std::memory_order_release);
      fresh->next_order = old->next_order;
      return true;
    }
    if (verdict == kCopied) drop_table_refs(ct);  // (out of object slots: the general way says so)
    table_pool_[32 - ct->shift].push_back(ct);
    if (verdict != kSomeNotCopied) return false;
  }
  // code[i] becomes kCopyAsIs (MPI_COMM_DUP_FN, a predefined attribute the dup carries), a run's
  // index (a user copy function whose run says copy) or kNoRun (empty, or not copied).
  std::uint32_t copies = 0;
  for (std::uint32_t i = 0; t && i <= t->mask; ++i) {
    const AttrRec& rec = t->recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    const std::uint32_t run = n ? code[i] : kNoRun;
    std::uint32_t c = kNoRun;
    if (key != kEmptyKey) {
      bool plain;
      if (predefined_rec(rec)) {
        const PredefinedKeyval* p = find_predefined(key);
        plain = run == kNoRun;
        if (p && p->copy_on_dup) c = kCopyAsIs;
      } else if (const KeyvalSlot* k = slot_of(key); k && k->spec.copy.action != CopyAction::User) {
        plain = run == kNoRun;
        if (k->spec.copy.action == CopyAction::Dup) c = kCopyAsIs;
      } else {
        plain = k && run != kNoRun && repr_of(rec) == Binding::C && k->spec.lang == Binding::C;
        if (plain) {
          const RanCopy& r = ran[run];
          plain = r.rc == 0 && (r.flag == 0 || r.flag == 1) && r.value_in == rec.value.load(std::memory_order_relaxed);
          if (r.flag) c = run;
        }
      }
      if (!plain) return false;
      if (c != kNoRun) ++copies;
    }
    code[i] = c;
  }
  const std::uint32_t new_slot = register_object(kind, new_h, kObjectNone, origin);
  if (new_slot == UINT32_MAX) return false;  // (out of object slots: the general way says so)
  ObjectSlot* fresh = objects_.get(new_slot);
  bool filled = true;
  if (copies) {
    reserve(fresh, copies);
    WriteSection ws(seq_);
    AttrTable* ct = fresh->table.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i <= t->mask; ++i) {
      const std::uint32_t c = code[i];
      if (c == kNoRun) continue;
      const AttrRec& rec = t->recs[i];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      const bool predefined = predefined_rec(rec);
      AttrRec* dst = probe_empty(ct, key);
      if (c == kCopyAsIs && repr_of(rec) != Binding::C) {  // a Fortran value (MPI_TAG_UB): its own cell
        filled = fill(fresh, dst, key, repr_of(rec), rec.value.load(std::memory_order_relaxed), predefined, origin);
        if (!filled) break;
      } else {
        dst->key.store(key, std::memory_order_relaxed);
        dst->meta.store(static_cast<std::uint32_t>(Binding::C) | (predefined ? kMetaPredefined : 0u),
                        std::memory_order_relaxed);
        dst->value.store(c == kCopyAsIs ? rec.value.load(std::memory_order_relaxed) : ran[c].value_out,
                         std::memory_order_relaxed);
        dst->set_at = origin;
      }
      ++ct->count;
      dst->order = rec.order;  // the copy keeps the set order (next_order below)
      if (!predefined) ++slot_of(key)->attributes;
    }
  }
  if (!filled) {  // out of value cells: the general way says so
    drop_attribute_refs(fresh);
    unregister_object(new_slot);
    return false;
  }
  fresh->next_order = old->next_order;
  return true;
}

// A dup through the old object's flat plan: each record copied as it is into the same slot of a
// clean table of the old one's size, no slot looked at but the plan's, no keyval's callbacks
// read. (Against copy_same_slots' pass over every slot, with each record's keyval looked up and
// its callbacks tested, on every dup of a plain object.)
bool Engine::Impl::dup_flat(ObjectKind kind, ObjectSlot* old, const AttrTable* t, Handle new_h, Origin origin) {
  const std::uint32_t n = t ? t->count : 0;
  const std::uint32_t new_slot = register_object(kind, new_h, kObjectNone, origin);
  if (new_slot == UINT32_MAX) return false;  // (out of object slots: the general way says so)
  ObjectSlot* fresh = objects_.get(new_slot);
  fresh->next_order = old->next_order;
  if (n == 0) return true;
  AttrTable* ct = take_table(32 - t->shift);
  place_as_is(old->flat_plan.data(), n, t, ct, origin);
  give_flat_plan(old, fresh, n);
  WriteSection ws(seq_);
  fresh->table.store(ct, std::memory_order_release);
  return true;
}

// A dup whose runs follow the old object's run plan: run j names step j's key, succeeded with
// flag 1 and was given the record's value (the rest of the plain case's checks hold while the
// plan does: a user keyval's C value, a C callback). Each record goes into the same slot of a
// clean table of the old one's size with the run's value, the plan's other steps as they are:
// no table probe for a run, no empty slot looked at, no keyval's callbacks read. False (the
// runs in another order, a flag 0, a value the callback was not given ...): nothing changed, the
// general way decides. (Cheaper than match_runs and copy_same_slots on every dup of a plain
// object: docs/design.md, "Dup and free mirror through plans".)
bool Engine::Impl::dup_runs(ObjectKind kind, ObjectSlot* old, const AttrTable* t, Handle new_h, const RanCopy* ran,
                            std::size_t n, Origin origin) {
  const FlatStep* const plan = old->flat_plan.data();
  const std::uint32_t count = t->count;  // (n runs: a table with n attributes at least)
  AttrTable* ct = take_table(32 - t->shift);
  const AttrRec* const src = t->recs.get();
  AttrRec* const out = ct->recs.get();
  std::size_t j = 0;
  for (; j < n; ++j) {
    const FlatStep& st = plan[j];
    const RanCopy& r = ran[j];
    const AttrRec& rec = src[st.slot];
    if (key_and_rc(r) != static_cast<std::uint32_t>(st.key) || r.flag != 1 ||
        r.value_in != rec.value.load(std::memory_order_relaxed))
      break;
    AttrRec& dst = out[st.slot];
    dst.key.store(st.key, std::memory_order_relaxed);
    dst.meta.store(static_cast<std::uint32_t>(Binding::C), std::memory_order_relaxed);  // (a run's step: C, user)
    dst.value.store(r.value_out, std::memory_order_relaxed);
    dst.set_at = origin;
    dst.order = rec.order;
    ++st.keyval->attributes;
  }
  std::uint32_t new_slot = UINT32_MAX;
  if (j == n) {
    place_as_is(plan + n, count - n, t, ct, origin);
    ct->count = count;
    new_slot = register_object(kind, new_h, kObjectNone, origin);
  }
  if (new_slot == UINT32_MAX) {  // undo (the old object still holds every keyval)
    // (What was placed: the first j run steps, or, all runs placed, every step of the plan.)
    const std::size_t placed = j == n ? count : j;
    for (std::size_t i = 0; i < placed; ++i) {
      if (plan[i].keyval) --plan[i].keyval->attributes;
      out[plan[i].slot].clear();
    }
    ct->count = 0;
    table_pool_[32 - ct->shift].push_back(ct);
    return false;
  }
  ObjectSlot* fresh = objects_.get(new_slot);
  give_flat_plan(old, fresh, count);
  fresh->next_order = old->next_order;
  WriteSection ws(seq_);
  fresh->table.store(ct, std::memory_order_release);
  return true;
}

// A copy made as its old object's flat plan says has the same records in the same slots: the
// plan is its own too. (A run plan's too: the library runs a copy's copy callbacks in the order
// it ran its original's, Open MPI and MPICH, measured.)
void Engine::Impl::give_flat_plan(const ObjectSlot* old, ObjectSlot* fresh, std::uint32_t n) {
  fresh->flat_plan.assign(old->flat_plan.begin(), old->flat_plan.begin() + n);
  fresh->flat_plan_ok = true;
  fresh->flat_runs = old->flat_runs;
  fresh->flat_free = old->flat_free;
}

// Whether a free's n runs are the delete callbacks its object's run plan says it needs (the plan
// with flat_free, n its flat_runs): each as required for its step's attribute, the steps taken
// in the plan's order (MPICH runs a copy's delete callbacks in the order it ran the copy
// callbacks) or the reverse (Open MPI runs them newest first, and a copy's attributes were set
// in the order the copy callbacks ran). Lock held; nothing changed. A run step's attribute is
// a C value of a keyval with a C copy callback (copy_same_slots takes no other with a run) and
// its delete callback is the keyval's too: ran_as_required's test of the languages is skipped,
// the value compared as it is. (With ran_as_required: ~30 instructions a run, ~15 this way,
// MPICH shadow dup + free [user], callgrind.)
bool Engine::Impl::runs_as_planned(const ObjectSlot* o, const AttrTable* t, const RanDelete* ran, std::size_t n) const {
  const FlatStep* st = o->flat_plan.data();
  std::ptrdiff_t stride = 1;
  if (ran[0].keyval != st->key) {
    st += n - 1;
    stride = -1;
  }
  const AttrRec* const recs = t->recs.get();
  const Handle h = o->handle;
  for (std::size_t j = 0; j < n; ++j, st += stride) {
    const RanDelete& r = ran[j];
    if (key_and_rc(r) != static_cast<std::uint32_t>(st->key) || r.object != h ||
        r.value != recs[st->slot].value.load(std::memory_order_relaxed))
      return false;
  }
  return true;
}

// A free through the object's flat plan, which says no attribute has a delete callback to call:
// the records cleared where the plan says they are, then the keyvals' counts dropped and those
// no attribute uses any more let go (after the write section: each has its own).
void Engine::Impl::free_flat(ObjectSlot* o, AttrTable* t) {
  const FlatStep* const plan = o->flat_plan.data();
  const std::uint32_t n = t->count;
  {
    WriteSection ws(seq_);
    AttrRec* const recs = t->recs.get();
    for (std::uint32_t j = 0; j < n; ++j) recs[plan[j].slot].clear();  // (C values: no cells)
    t->count = 0;
    o->table.store(nullptr, std::memory_order_relaxed);  // (so unregister_object skips the empty table)
  }
  table_pool_[32 - t->shift].push_back(t);
  bool some_unused = false;
  for (std::uint32_t j = 0; j < n; ++j)
    if (KeyvalSlot* const k = plan[j].keyval) some_unused |= --k->attributes == 0;
  if (__builtin_expect(some_unused, 0)) {
    for (std::uint32_t j = 0; j < n; ++j)
      if (KeyvalSlot* const k = plan[j].keyval; k && k->attributes == 0) unref_keyval(k);
  }
}

// Checks each attribute in one pass (each one with a user delete function had its run, as
// required; no other had one), dropping its keyval reference as it goes (undone if one is not
// plain), then clears the table in one more pass and drops the object. (MPICH emulate [pre], 64
// attributes: a check pass then a pass dropping references and records cost ~95 instructions an
// attribute; ~45 this way, callgrind.)
template <bool kRuns>
bool Engine::Impl::free_plain_pass(ObjectSlot* o, AttrTable* t, const RanDelete* ran, const std::uint32_t* run_of,
                                   bool* some_unused) {
  AttrRec* const recs = t->recs.get();
  const std::uint32_t capacity = t->capacity();
  std::uint32_t i = 0;
  bool plain = true;
  for (; i < capacity; ++i) {
    const AttrRec& rec = recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (key == kEmptyKey || predefined_rec(rec)) {
      if (kRuns && key != kEmptyKey && run_of[i] != kNoRun) {
        plain = false;
        break;
      }
      continue;
    }
    KeyvalSlot* k = slot_of(key);
    const std::uint32_t run = kRuns ? run_of[i] : kNoRun;
    const bool as_required =
        k && (k->spec.del.action != DeleteAction::User ? run == kNoRun
                                                        : kRuns && run != kNoRun && ran_as_required(o, k, rec, ran[run]));
    if (!as_required) {
      plain = false;
      break;
    }
    if (--k->attributes == 0) *some_unused = true;
  }
  if (plain) return true;
  for (std::uint32_t j = 0; j < i; ++j) {  // undo
    const AttrRec& rec = recs[j];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (key != kEmptyKey && !predefined_rec(rec)) ++slot_of(key)->attributes;
  }
  return false;
}

bool Engine::Impl::free_plain(ObjectSlot* o, std::uint32_t slot, const RanDelete* ran, std::size_t n) {
  AttrTable* t = o->table.load(std::memory_order_relaxed);
  if (t && o->flat_plan_ok && o->flat_free && n == o->flat_runs && (n == 0 || runs_as_planned(o, t, ran, n))) {
    free_flat(o, t);
  } else if (t) {
    std::uint32_t* run_of = n ? slot_codes(t->capacity()) : nullptr;
    if (!match_runs(t, ran, n, run_of)) return false;
    bool some_unused = false;
    if (!(n ? free_plain_pass<true>(o, t, ran, run_of, &some_unused) : free_plain_pass<false>(o, t, nullptr, nullptr, &some_unused)))
      return false;
    // The table leaves the object (and the records' cells go back) under one write section, then
    // the keyvals no attribute uses any more are destroyed, each under its own (unref_keyval's:
    // sections do not nest, so not inside this one), read from the table no reader reaches any
    // more; then the table is cleared and pooled. (A reader that took the table before it left
    // finds the counter moved.)
    AttrRec* const recs = t->recs.get();
    {
      WriteSection ws(seq_);
      o->table.store(nullptr, std::memory_order_relaxed);  // (so unregister_object skips the empty table)
      if (fortran_values_.load(std::memory_order_relaxed)) {
        for (std::uint32_t i = 0; i <= t->mask; ++i)
          if (recs[i].key.load(std::memory_order_relaxed) != kEmptyKey) release_cell(recs[i]);
      }
    }
    if (some_unused) {
      for (std::uint32_t i = 0; i <= t->mask; ++i) {
        const KeyvalId key = recs[i].key.load(std::memory_order_relaxed);
        if (key == kEmptyKey || predefined_rec(recs[i])) continue;
        KeyvalSlot* k = slot_of(key);
        if (k->attributes == 0) unref_keyval(k);
      }
    }
    for (std::uint32_t i = 0; i <= t->mask; ++i) recs[i].clear();
    t->count = 0;
    table_pool_[32 - t->shift].push_back(t);
  } else if (n) {
    return false;  // runs for an object without attributes
  }
  unregister_object(slot);
  return true;
}

void Engine::Impl::drop_table_refs(AttrTable* t) {
  for (std::uint32_t i = 0; i <= t->mask; ++i) {
    AttrRec& rec = t->recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (key == kEmptyKey) continue;
    if (!predefined_rec(rec)) {
      KeyvalSlot* k = slot_of(key);
      if (--k->attributes == 0) unref_keyval(k);
    }
    release_cell(rec);
    rec.clear();
  }
  t->count = 0;
}

bool Engine::Impl::dup_object_ran(ObjectKind kind, Handle old_h, Handle new_h, const RanCopy* ran, std::size_t n,
                                  Origin origin) {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return false;
  std::uint32_t old_slot, existing;
  if (find_object(kind, old_h, &old_slot) != Status::Ok) return false;
  if (find_object(kind, new_h, &existing) != Status::ObjectUnknown) return false;
  ObjectSlot* old = objects_.get(old_slot);
  if (old->mutating) return false;
  return dup_plain(kind, old, new_h, ran, n, origin);
}

bool Engine::Impl::free_object_ran(ObjectKind kind, Handle h, const RanDelete* ran, std::size_t n) {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return false;
  std::uint32_t slot;
  if (find_object(kind, h, &slot) != Status::Ok) return false;
  ObjectSlot* o = objects_.get(slot);
  if ((o->flags & kObjectPredefined) || o->mutating || (t_depth > 0 && in_callback_for(this, slot))) return false;
  return free_plain(o, slot, ran, n);
}

bool Engine::dup_object_ran(ObjectKind kind, Handle old_handle, Handle new_handle, const RanCopy* ran, std::size_t n,
                            Origin origin) {
  return impl_->dup_object_ran(kind, old_handle, new_handle, ran, n, origin);
}
bool Engine::free_object_ran(ObjectKind kind, Handle handle, const RanDelete* ran, std::size_t n) {
  return impl_->free_object_ran(kind, handle, ran, n);
}

}  // namespace attrcheck
