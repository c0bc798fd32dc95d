// The engine's attribute operations: set, get (the lock-free read), delete, and the checks they share.
#include <algorithm>
#include <vector>

#include "engine_impl.hpp"

namespace attrcheck {

Result Engine::Impl::set_attr(ObjectKind kind, Handle h, KeyvalId key, Binding from, std::uint64_t value, Origin origin,
                              KeyUse use) {
  value = normalise(from, value);
  Lock lk(mu_);
  std::uint32_t slot;
  KeyvalSlot* k;
  const PredefinedKeyval* pre;
  const Status s = acquire_object(lk, kind, h, key, true, &slot, &k, &pre, use);
  if (s != Status::Ok) return {s, 0};
  ObjectSlot* o = objects_.get(slot);
  // SetEntered: a freed keyval serves only the attribute the set replaces (the one whose delete
  // callback can have freed it during the call).
  if (__builtin_expect(use == KeyUse::SetEntered && k && k->state.load(std::memory_order_relaxed) != kKeyAlive, 0) &&
      !find_attr(o->table.load(std::memory_order_relaxed), key))
    return {Status::KeyvalFreed, 0};
  return set_located(o, k, key, from, value, origin);
}

// set_attr once the object and keyval are known and the call may proceed (lock held; `value`
// normalised). Inlined into set_attr_at, the emulated set's path (out of line, its frame and the
// call cost ~30 instructions a set, callgrind).
[[gnu::always_inline]] inline Result Engine::Impl::set_located(ObjectSlot* o, KeyvalSlot* k, KeyvalId key,
                                                              Binding from, std::uint64_t value, Origin origin) {
  AttrTable* const t = o->table.load(std::memory_order_relaxed);
  AttrRec* empty;
  AttrRec* rec = find_attr_or_empty(t, key, &empty);
  if (rec && k->spec.del.action == DeleteAction::User) {
    // Replace: the old value's delete callback runs first, and may veto the set.
    const Result r = run_user_delete(o, k, &rec, CallbackCause::Set);
    if (!r.ok()) return r;
  }
  // Replacing a C value with a C value needs no cell and changes no count (as in set_attr_ran):
  // saves store_set / put_at (emulate set: 489 -> ~445 instructions, Open MPI, callgrind).
  if (rec && from == Binding::C && repr_of(*rec) == Binding::C) {
    WriteSection ws(seq_);
    store_value(o, rec, static_cast<std::uint32_t>(Binding::C), value, origin);
    return {};
  }
  // A new C value needs no cell either: put_at / fill without their cell handling (emulate
  // set + delete ~25 instructions, callgrind).
  if (!rec && from == Binding::C) {
    WriteSection ws(seq_);
    // (Where the lookup's probe ended, unless the table must grow: one probe, not two.)
    if (__builtin_expect(empty && (t->count + 1) * 4 <= t->capacity() * 3, 1)) {
      ++t->count;
      rec = empty;
    } else {
      rec = insert_slot(o, key);
    }
    rec->key.store(key, std::memory_order_relaxed);
    store_value(o, rec, static_cast<std::uint32_t>(Binding::C), value, origin);
    ++k->attributes;
    return {};
  }
  return store_set(o, k, rec, key, from, value, origin);
}

// The value of attribute `r` as keyval k's callbacks are passed it, where either side is Fortran.
// (Out of line: run_user_delete's frame stays small.)
[[gnu::noinline]] std::uint64_t Engine::Impl::callback_word(const AttrRec& r, const KeyvalSlot* k) const {
  return translate(repr_of(r), r.value.load(std::memory_order_relaxed), cell_at(r.cell()), k->spec.lang).word;
}

// A set's or a delete's run of the delete callback (keyval k's User action) for attribute *rec of
// object o (lock held; released while the callback runs), without the DeleteJob of the general
// path (delete_one): a set replacing a value with a user delete callback ~190 -> ~120
// instructions, callgrind. No pin: the attribute holds its keyval (k->attributes) until this call
// erases it, and nothing else can meanwhile (the object is marked as mutating by this thread:
// other threads wait, and this thread's re-entrant changes of it are refused). Ok: *rec is the
// attribute's record again; where it was unless the engine changed at all (every change moves
// seq_), else it is looked up again.
Result Engine::Impl::run_user_delete(ObjectSlot* o, KeyvalSlot* k, AttrRec** rec, CallbackCause cause) {
  const AttrRec& r = **rec;
  const KeyvalId key = r.key.load(std::memory_order_relaxed);
  const Binding repr = repr_of(r);
  std::uint64_t word = r.value.load(std::memory_order_relaxed);
  if (__builtin_expect(repr != Binding::C || k->spec.lang != Binding::C, 0)) word = callback_word(r, k);
  const DeleteCall call{o->kind, o->handle, key, k->spec.lang, k->spec.del.fn, k->spec.extra_state, word, cause, repr};
  o->mutating = this_thread_token();
  const std::uint64_t before = seq_.load(std::memory_order_relaxed);
  // (The lock directly, not through the caller's unique_lock: nothing in between can throw.)
  mu_.unlock();
  const Result result = invoke_delete(o->index, call);
  mu_.lock();
  o->mutating = nullptr;
  if (!result.ok()) return result;
  if (seq_.load(std::memory_order_relaxed) != before) *rec = find_attr(o->table.load(std::memory_order_relaxed), key);
  return {};
}

// Engine::set_attr_at: set_attr with the cursor standing for the lookups of the object and keyval.
bool Engine::Impl::set_attr_at(const SetCursor& c, Binding from, std::uint64_t value, Origin origin, AtOutcome* out) {
  value = normalise(from, value);
  std::lock_guard<SpinLock> lk(mu_);
  ObjectSlot* o = cursor_object(c);
  if (!o) return false;
  auto* k = static_cast<KeyvalSlot*>(const_cast<void*>(c.keyval));
  out->result = set_located(o, k, k->id.load(std::memory_order_relaxed), from, value, origin);
  out->version = seq_.load(std::memory_order_relaxed);
  return true;
}

// Engine::find_set_cursor: set_attr's checks, remembered.
bool Engine::Impl::find_set_cursor(ObjectKind kind, Handle h, KeyvalId key, std::uint64_t layout, SetCursor* out,
                     bool* user_delete) const {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return false;
  std::uint32_t slot;
  if (find_object(kind, h, &slot) != Status::Ok) return false;
  KeyvalSlot* k;
  const PredefinedKeyval* pre;
  if (check_keyval(kind, key, KeyUse::Set, &k, &pre) != Status::Ok || !k) return false;
  *out = SetCursor{layout, objects_.find(slot), k};
  if (user_delete) *user_delete = k->spec.del.action == DeleteAction::User;
  return true;
}

// Engine::set_attr_ran: set_attr for a set whose delete callback already ran elsewhere. The
// cursor stands for set_attr's object and keyval checks while the layout reads the same; the
// rest are made here. Nothing waits and nothing is called: anything other than the plain case
// (no callbacks running for the object, exactly the delete callback the standard requires here
// and it succeeded) answers false and changes nothing.
bool Engine::Impl::set_attr_ran(const SetCursor& c, Binding from, std::uint64_t value, Origin origin, const RanDelete* ran,
                  std::uint64_t* version, bool after_callback) {
  value = normalise(from, value);
  std::lock_guard<SpinLock> lk(mu_);
  if (!c.object) return false;
  auto* o = static_cast<ObjectSlot*>(const_cast<void*>(c.object));
  auto* k = static_cast<KeyvalSlot*>(const_cast<void*>(c.keyval));
  if (layout_.load(std::memory_order_relaxed) != c.layout) {
    // Engine::set_attr_after_delete: the records never move or go (chunked storage), and while
    // the attribute the callback ran for is there (ran_as_required, below) its object is live and
    // its keyval held, freed or not.
    if (!after_callback || !ran || !o->live || o->handle != ran->object ||
        k->id.load(std::memory_order_relaxed) != ran->keyval || k->state.load(std::memory_order_relaxed) == kKeyDestroyed ||
        k->state.load(std::memory_order_relaxed) == kKeyEmpty)
      return false;
  }
  if ((o->mutating && !held_here(o)) || (t_depth > 0 && in_callback_for(this, o->index))) return false;
  const KeyvalId key = k->id.load(std::memory_order_relaxed);
  AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), key);
  const bool needs_delete = rec && k->spec.del.action == DeleteAction::User;
  if (needs_delete != (ran != nullptr)) return false;
  if (from != Binding::C && free_cells_.empty() && cell_count_ >= decltype(cells_)::kCapacity)
    return false;  // set_attr would fail after the callback: let it
  if (ran && !ran_as_required(o, k, *rec, *ran)) return false;
  if (__builtin_expect(o->mutating != nullptr, 0)) take_hold(o);
  // Replacing a C value with a C value needs no cell and changes no count: done here, it saves
  // the store_set / put_at call chain (~45 instructions of a mirrored set, callgrind).
  if (rec && from == Binding::C && repr_of(*rec) == Binding::C) {
    WriteSection ws(seq_);
    store_value(o, rec, static_cast<std::uint32_t>(Binding::C), value, origin);
  } else if (!store_set(o, k, rec, key, from, value, origin).ok()) {
    return false;
  }
  if (version) *version = seq_.load(std::memory_order_relaxed);
  return true;
}

// Engine::c_delete_function: the keyval's spec does not change while it lives (the cursor holds).
bool Engine::Impl::c_delete_function(const SetCursor& c, void** fn, std::uint64_t* extra_state) const {
  const auto* k = static_cast<const KeyvalSlot*>(c.keyval);
  if (!k || k->spec.del.action != DeleteAction::User || k->spec.lang != Binding::C) return false;
  *fn = k->spec.del.fn;
  *extra_state = k->spec.extra_state;
  return true;
}

// Engine::delete_attr_ran: the cursor stands for delete_attr's object and keyval checks (a
// keyval valid for a set is valid for a delete) while the layout reads the same; the rest are
// made here. Saves delete_attr's lookups of the object and keyval and, with a user delete
// function, the replay of its callback.
bool Engine::Impl::delete_attr_ran(const SetCursor& c, const RanDelete* ran, std::uint64_t* version) {
  std::lock_guard<SpinLock> lk(mu_);
  if (!c.object || layout_.load(std::memory_order_relaxed) != c.layout) return false;
  auto* o = static_cast<ObjectSlot*>(const_cast<void*>(c.object));
  auto* k = static_cast<KeyvalSlot*>(const_cast<void*>(c.keyval));
  if ((o->mutating && !held_here(o)) || (t_depth > 0 && in_callback_for(this, o->index))) return false;
  AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), k->id.load(std::memory_order_relaxed));
  if (!rec) return false;  // absent: delete_attr says so
  if ((k->spec.del.action == DeleteAction::User) != (ran != nullptr)) return false;
  if (ran && !ran_as_required(o, k, *rec, *ran)) return false;
  if (__builtin_expect(o->mutating != nullptr, 0)) take_hold(o);
  drop_attr(o, rec, k);
  if (version) *version = seq_.load(std::memory_order_relaxed);
  return true;
}

// The checks of a call that reads (get) or may delete an attribute (lock held): Ok with the
// attribute's record (nullptr if not set), or why the call is refused.
Status Engine::Impl::locate_attr(ObjectKind kind, Handle h, KeyvalId key, KeyUse use, const AttrRec** rec) const {
  if (finalized_.load(std::memory_order_relaxed)) return Status::Finalized;
  std::uint32_t slot;
  Status s = find_object(kind, h, &slot);
  if (s != Status::Ok) return s;
  KeyvalSlot* k;
  const PredefinedKeyval* pre;
  s = check_keyval(kind, key, use, &k, &pre);
  if (s != Status::Ok) return s;
  *rec = find_attr(objects_.find(slot)->table.load(std::memory_order_relaxed), key);
  return Status::Ok;
}

Result Engine::Impl::get_attr_locked(ObjectKind kind, Handle h, KeyvalId key, Binding as, void* out, int* flag,
                       bool* truncated) const {
  Lock lk(mu_);
  const AttrRec* rec = nullptr;
  const Status s = locate_attr(kind, h, key, KeyUse::Get, &rec);
  if (s != Status::Ok) return {s, 0};
  if (!rec) {
    *flag = 0;
    if (truncated) *truncated = false;
    return {};
  }
  const Read r = translate(repr_of(*rec), rec->value.load(std::memory_order_relaxed),
                           cell_at(rec->cell()), as);
  store_out(as, out, r.word);
  *flag = 1;
  if (truncated) *truncated = r.truncated;
  return {};
}

// The lock-free read: no store to shared memory, validated by the sequence counter.
Result Engine::Impl::get_attr(ObjectKind kind, Handle h, KeyvalId key, Binding as, void* out, int* flag,
                bool* truncated) const {
  if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
  if (!out || !flag) return {Status::NullArgument, 0};
  for (int attempt = 0; attempt < 16; ++attempt) {
    const std::uint64_t s1 = seq_.load(std::memory_order_acquire);
    if (s1 & 1) {
      cpu_relax();
      continue;
    }
    // (The null handle is never registered: it misses here and the locked path names it.)
    const std::uint32_t slot = map_.load(std::memory_order_acquire)->find(kind, h);
    const ObjectSlot* o = slot == UINT32_MAX ? nullptr : objects_.find(slot);
    if (!o) break;  // unknown object: classify under the lock
    // The keyval: a live user keyval of this kind, or a predefined one.
    const KeyvalSlot* k = slot_of(key);
    if (!(k && k->id.load(std::memory_order_relaxed) == key &&
          k->state.load(std::memory_order_relaxed) == kKeyAlive &&
          k->kind.load(std::memory_order_relaxed) == static_cast<std::uint8_t>(kind))) {
      const PredefinedKeyval* p = find_predefined(key);
      if (!p || p->kind.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(kind) ||
          key == config.keyval_invalid)
        break;
    }
    const AttrTable* t = o->table.load(std::memory_order_acquire);
    bool found = false;
    std::uint64_t word = 0;
    std::uint32_t meta = 0;
    if (t) {
      std::uint32_t i = t->home(key);
      for (std::uint32_t n = 0; n <= t->mask; ++n, i = (i + 1) & t->mask) {
        const KeyvalId rk = t->recs[i].key.load(std::memory_order_relaxed);
        if (rk == kEmptyKey) break;
        if (rk == key) {
          found = true;
          meta = t->recs[i].meta.load(std::memory_order_relaxed);
          word = t->recs[i].value.load(std::memory_order_relaxed);
          break;
        }
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) != s1) continue;
    if (!found) {
      *flag = 0;
      if (truncated) *truncated = false;
      return {};
    }
    // Consistent: `cell` belongs to this attribute. A C read of a Fortran value only needs the
    // cell's address; the word itself is already in `word`.
    const Read r = translate(static_cast<Binding>(meta & kMetaReprMask), word, cell_at(meta >> kMetaCellShift), as);
    store_out(as, out, r.word);
    *flag = 1;
    if (truncated) *truncated = r.truncated;
    return {};
  }
  return get_attr_locked(kind, h, key, as, out, flag, truncated);
}

// Engine::check_delete: delete_attr's checks, nothing changed.
Result Engine::Impl::check_delete(ObjectKind kind, Handle h, KeyvalId key, int* present) const {
  Lock lk(mu_);
  const AttrRec* rec = nullptr;
  const Status s = locate_attr(kind, h, key, KeyUse::Delete, &rec);
  *present = s == Status::Ok && rec ? 1 : 0;
  return {s, 0};
}

Result Engine::Impl::delete_attr(ObjectKind kind, Handle h, KeyvalId key) {
  Lock lk(mu_);
  std::uint32_t slot;
  KeyvalSlot* k;
  const PredefinedKeyval* pre;
  const Status s = acquire_object(lk, kind, h, key, true, &slot, &k, &pre, KeyUse::Delete);
  if (s != Status::Ok) return {s, 0};
  ObjectSlot* o = objects_.get(slot);
  AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), key);
  if (!rec) return {Status::AttrAbsent, 0};
  return delete_located(o, k, rec);
}

// delete_attr once the attribute's record `rec` is found and the call may proceed (lock held).
// Inlined into delete_attr_at, the emulated delete's path (out of line: ~25 instructions a
// delete more, callgrind).
[[gnu::always_inline]] inline Result Engine::Impl::delete_located(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec) {
  if (k->spec.del.action == DeleteAction::NullDelete) {  // nothing to call: erase in place
    drop_attr(o, rec, k);
    return {};
  }
  return delete_with_callback(o, k, rec);
}

// delete_located with a delete callback to run: then the record is erased.
Result Engine::Impl::delete_with_callback(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec) {
  const Result r = run_user_delete(o, k, &rec, CallbackCause::Delete);
  if (!r.ok() || !rec) return r;
  drop_attr(o, rec, k);
  return r;
}

// Engine::delete_attr_at: delete_attr with the cursor standing for the lookups of the object and
// keyval. Written so that its common case (no delete callback) calls nothing: the lock taken and
// released directly, everything else out of line, so the function saves no registers (~20
// instructions a delete, callgrind).
bool Engine::Impl::delete_attr_at(const SetCursor& c, AtOutcome* out) {
  mu_.lock();
  ObjectSlot* const o = cursor_object(c);
  KeyvalSlot* const k = static_cast<KeyvalSlot*>(const_cast<void*>(c.keyval));
  AttrRec* const rec = o ? find_attr(o->table.load(std::memory_order_relaxed), k->id.load(std::memory_order_relaxed)) : nullptr;
  if (!rec) {  // the cursor no longer serves, or absent: delete_attr decides, or says so
    mu_.unlock();
    return false;
  }
  if (k->spec.del.action != DeleteAction::NullDelete) return delete_at_with_callback(o, k, rec, out);
  drop_attr(o, rec, k);
  out->result = {};
  out->version = seq_.load(std::memory_order_relaxed);
  mu_.unlock();
  return true;
}

// delete_attr_at with a delete callback to run (lock held; released here).
bool Engine::Impl::delete_at_with_callback(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec, AtOutcome* out) {
  std::lock_guard<SpinLock> lk(mu_, std::adopt_lock);
  out->result = delete_with_callback(o, k, rec);
  out->version = seq_.load(std::memory_order_relaxed);
  return true;
}

Result Engine::Impl::install_predefined(ObjectKind kind, Handle h, KeyvalId key, Binding repr, std::uint64_t value) {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
  std::uint32_t slot;
  Status s = find_object(kind, h, &slot);
  if (s != Status::Ok) return {s, 0};
  const PredefinedKeyval* p = find_predefined(key);
  if (!p) return {Status::KeyvalUnknown, 0};
  if (p->kind.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(kind))
    return {Status::KeyvalKindMismatch, 0};
  return {put(objects_.get(slot), key, repr, normalise(repr, value), true, 0), 0};
}

// Public interface.

Result Engine::set_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Binding from, std::uint64_t value,
                        Origin origin) {
  return impl_->set_attr(kind, handle, keyval, from, value, origin);
}
Result Engine::set_attr_entered(ObjectKind kind, Handle handle, KeyvalId keyval, Binding from, std::uint64_t value,
                                Origin origin) {
  return impl_->set_attr(kind, handle, keyval, from, value, origin, Impl::KeyUse::SetEntered);
}
bool Engine::find_set_cursor(ObjectKind kind, Handle handle, KeyvalId keyval, std::uint64_t layout,
                             SetCursor* out, bool* user_delete) const {
  return impl_->find_set_cursor(kind, handle, keyval, layout, out, user_delete);
}
bool Engine::set_attr_at(const SetCursor& cursor, Binding from, std::uint64_t value, Origin origin, AtOutcome* out) {
  return impl_->set_attr_at(cursor, from, value, origin, out);
}
bool Engine::delete_attr_at(const SetCursor& cursor, AtOutcome* out) { return impl_->delete_attr_at(cursor, out); }
bool Engine::delete_attr_ran(const SetCursor& cursor, const RanDelete* ran, std::uint64_t* version) {
  return impl_->delete_attr_ran(cursor, ran, version);
}
bool Engine::set_attr_ran(const SetCursor& cursor, Binding from, std::uint64_t value, Origin origin,
                          const RanDelete* ran, std::uint64_t* version) {
  return impl_->set_attr_ran(cursor, from, value, origin, ran, version);
}
bool Engine::set_attr_after_delete(const SetCursor& cursor, Binding from, std::uint64_t value, Origin origin,
                                   const RanDelete& ran, std::uint64_t* version) {
  return impl_->set_attr_ran(cursor, from, value, origin, &ran, version, true);
}
bool Engine::c_delete_function(const SetCursor& cursor, void** fn, std::uint64_t* extra_state) const {
  return impl_->c_delete_function(cursor, fn, extra_state);
}
Result Engine::get_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Binding as, void* attribute_val,
                        int* flag, bool* truncated) const {
  return impl_->get_attr(kind, handle, keyval, as, attribute_val, flag, truncated);
}
Result Engine::delete_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Origin) {
  return impl_->delete_attr(kind, handle, keyval);
}
Result Engine::check_delete(ObjectKind kind, Handle handle, KeyvalId keyval, int* present) const {
  int local = 0;
  return impl_->check_delete(kind, handle, keyval, present ? present : &local);
}
Result Engine::install_predefined(ObjectKind kind, Handle handle, KeyvalId keyval, Binding repr,
                                  std::uint64_t value) {
  return impl_->install_predefined(kind, handle, keyval, repr, value);
}

}  // namespace attrcheck
