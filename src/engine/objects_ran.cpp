// The engine's dup and free for a host whose other cache already ran the callbacks
// (Engine::dup_object_ran, Engine::free_object_ran: the runtime's shadow mode). The runs are
// matched to the attributes in one pass over the runs (one table probe each), checked in one pass
// over the object's table, and the copy is built (or the object dropped) in one more: no callback
// is called, the lock is never released, no keyval is pinned, the dup's records go in under one
// write section and a free drops the whole table at once. Anything but the plain case answers
// false with nothing changed, and the host goes through dup_object / free_object and its replay,
// which reports what differs. (MPICH, shadow, 64 attributes with user callbacks: the replayed
// dup + free cost ~110k instructions of which ~75k per-attribute replay, callgrind.)
#include <vector>

#include "engine_impl.hpp"

namespace attrcheck {

namespace {
// run_of codes besides a run's index: no run, and (dup) an attribute copied as it is.
constexpr std::uint32_t kNoRun = UINT32_MAX;
constexpr std::uint32_t kCopyAsIs = UINT32_MAX - 1;
}  // namespace

template <typename Run>
bool Engine::Impl::match_runs(const AttrTable* t, const Run* ran, std::size_t n, std::vector<std::uint32_t>* run_of) {
  run_of->assign(t ? t->capacity() : 0, kNoRun);
  if (n == 0) return true;
  if (!t || n >= kCopyAsIs) return false;
  AttrTable* table = const_cast<AttrTable*>(t);  // (find_attr changes nothing)
  for (std::size_t j = 0; j < n; ++j) {
    const AttrRec* rec = find_attr(table, ran[j].keyval);
    if (!rec) return false;  // a callback for an attribute the object does not hold
    std::uint32_t& run = (*run_of)[static_cast<std::size_t>(rec - t->recs.get())];
    if (run != kNoRun) return false;  // run twice
    run = static_cast<std::uint32_t>(j);
  }
  return true;
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
  const AttrTable* t = old->table.load(std::memory_order_relaxed);
  std::vector<std::uint32_t> run_of = index_pool_.take();
  bool plain = match_runs(t, ran, n, &run_of);
  // Which attributes the dup copies, and whether exactly their copy callbacks ran as required:
  // run_of[i] becomes kCopyAsIs (MPI_COMM_DUP_FN, a predefined attribute the dup carries), a
  // run's index (a user copy function: copied if its flag says so) or kNoRun (not copied).
  std::uint32_t copies = 0;
  for (std::uint32_t i = 0; plain && t && i <= t->mask; ++i) {
    const AttrRec& rec = t->recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (key == kEmptyKey) continue;
    std::uint32_t& run = run_of[i];
    if (predefined_rec(rec)) {
      const PredefinedKeyval* p = find_predefined(key);
      plain = run == kNoRun;
      if (p && p->copy_on_dup) run = kCopyAsIs;
    } else {
      const KeyvalSlot* k = slot_of(key);
      const CopyAction action = k ? k->spec.copy.action : CopyAction::NullCopy;
      if (!k) {
        plain = false;
      } else if (action != CopyAction::User) {
        plain = run == kNoRun;
        if (action == CopyAction::Dup) run = kCopyAsIs;
      } else {
        plain = run != kNoRun && repr_of(rec) == Binding::C && k->spec.lang == Binding::C;
        if (!plain) break;
        const RanCopy& r = ran[run];
        plain = r.rc == 0 && (r.flag == 0 || r.flag == 1) && r.value_in == rec.value.load(std::memory_order_relaxed);
        if (r.flag == 0) run = kNoRun;
      }
    }
    if (run != kNoRun) ++copies;
  }
  const std::uint32_t new_slot = plain ? register_object(kind, new_h, kObjectNone, origin) : UINT32_MAX;
  if (new_slot == UINT32_MAX) {  // (out of object slots: dup_object says so)
    index_pool_.give(std::move(run_of));
    return false;
  }
  ObjectSlot* fresh = objects_.get(new_slot);
  reserve(fresh, copies);
  bool filled = true;
  if (copies) {
    AttrTable* ct = fresh->table.load(std::memory_order_relaxed);
    WriteSection ws(seq_);
    for (std::uint32_t i = 0; i <= t->mask; ++i) {
      const std::uint32_t run = run_of[i];
      if (run == kNoRun) continue;
      const AttrRec& rec = t->recs[i];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      const bool predefined = predefined_rec(rec);
      AttrRec* dst = probe_empty(ct, key);
      ++ct->count;
      if (run == kCopyAsIs && repr_of(rec) != Binding::C) {  // a Fortran value (MPI_TAG_UB): its own cell
        filled = fill(fresh, dst, key, repr_of(rec), rec.value.load(std::memory_order_relaxed), predefined, origin);
        if (!filled) break;
      } else {
        dst->key.store(key, std::memory_order_relaxed);
        dst->meta.store(static_cast<std::uint32_t>(Binding::C) | (predefined ? kMetaPredefined : 0u),
                        std::memory_order_relaxed);
        dst->value.store(run == kCopyAsIs ? rec.value.load(std::memory_order_relaxed) : ran[run].value_out,
                         std::memory_order_relaxed);
        dst->set_at = origin;
      }
      dst->order = rec.order;  // the copy keeps the set order (next_order below)
      if (!predefined) ++slot_of(key)->attributes;
    }
    if (!filled) --ct->count;  // (the record fill() refused holds nothing)
  }
  index_pool_.give(std::move(run_of));
  if (!filled) {  // out of value cells: dup_object says so
    drop_attribute_refs(fresh);
    unregister_object(new_slot);
    return false;
  }
  fresh->next_order = old->next_order;
  return true;
}

bool Engine::Impl::free_object_ran(ObjectKind kind, Handle h, const RanDelete* ran, std::size_t n) {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return false;
  std::uint32_t slot;
  if (find_object(kind, h, &slot) != Status::Ok) return false;
  ObjectSlot* o = objects_.get(slot);
  if ((o->flags & kObjectPredefined) || o->mutating || (t_depth > 0 && in_callback_for(this, slot))) return false;
  const AttrTable* t = o->table.load(std::memory_order_relaxed);
  std::vector<std::uint32_t> run_of = index_pool_.take();
  bool plain = match_runs(t, ran, n, &run_of);
  // Each attribute with a user delete function had its run, as required; no other had one.
  for (std::uint32_t i = 0; plain && t && i <= t->mask; ++i) {
    const AttrRec& rec = t->recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (key == kEmptyKey) continue;
    const std::uint32_t run = run_of[i];
    const KeyvalSlot* k = predefined_rec(rec) ? nullptr : slot_of(key);
    if (!k || k->spec.del.action != DeleteAction::User) {
      plain = run == kNoRun && (k || predefined_rec(rec));
    } else {
      plain = run != kNoRun && ran_as_required(o, k, rec, ran[run]);
    }
  }
  index_pool_.give(std::move(run_of));
  if (!plain) return false;
  drop_attribute_refs(o);
  unregister_object(slot);
  return true;
}

bool Engine::dup_object_ran(ObjectKind kind, Handle old_handle, Handle new_handle, const RanCopy* ran, std::size_t n,
                            Origin origin) {
  return impl_->dup_object_ran(kind, old_handle, new_handle, ran, n, origin);
}
bool Engine::free_object_ran(ObjectKind kind, Handle handle, const RanDelete* ran, std::size_t n) {
  return impl_->free_object_ran(kind, handle, ran, n);
}

}  // namespace attrcheck
