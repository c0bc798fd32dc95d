// The engine's object operations: create, dup (copy callbacks, rollback), free and forget.
#include <algorithm>
#include <vector>

#include "engine_impl.hpp"

namespace attrcheck {

Result Engine::Impl::create_object(ObjectKind kind, Handle h, std::uint8_t flags, Origin origin) {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
  std::uint32_t slot;
  const Status s = find_object(kind, h, &slot);
  if (s == Status::ObjectNull) return {s, 0};
  if (s == Status::Ok) return {Status::ObjectExists, 0};
  if (register_object(kind, h, flags, origin) == UINT32_MAX) return {Status::CapacityExhausted, 0};
  return {};
}

// The new object of a dup holds no attribute of the key yet (while the dup runs only this thread
// changes it: other threads wait on `mutating`, and this one's re-entrant calls are refused), so
// no lookup is needed; a C value needs no cell, and reserve() made the table big enough (a copy
// through put(): ~90 instructions, this: ~30, inlined, callgrind).
Status Engine::Impl::put_copy(ObjectSlot* o, KeyvalId key, Binding repr, std::uint64_t word, bool predefined,
                              Origin origin) {
  AttrTable* t = o->table.load(std::memory_order_relaxed);
  if (repr != Binding::C || !t || (t->count + 1) * 4 > t->capacity() * 3)
    return put_at(o, nullptr, key, repr, word, predefined, origin);
  WriteSection ws(seq_);
  ++t->count;
  AttrRec* rec = probe_empty(t, key);
  rec->key.store(key, std::memory_order_relaxed);
  store_value(o, rec, static_cast<std::uint32_t>(Binding::C) | (predefined ? kMetaPredefined : 0u), word, origin);
  return Status::Ok;
}

Result Engine::Impl::dup_object(ObjectKind kind, Handle old_h, Handle new_h, Origin origin) {
  Lock lk(mu_);
  std::uint32_t old_slot;
  for (;;) {
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    Status s = find_object(kind, old_h, &old_slot);
    if (s != Status::Ok) return {s, 0};
    std::uint32_t existing;
    s = find_object(kind, new_h, &existing);
    if (s == Status::ObjectNull) return {s, 0};
    if (s == Status::Ok) return {Status::ObjectExists, 0};
    const ObjectSlot* old = objects_.get(old_slot);
    if (old->mutating && old->mutating != this_thread_token()) {
      wait_turn(lk);
      continue;
    }
    break;
  }
  ObjectSlot* old = objects_.get(old_slot);
  // No user copy callback to call: the copy made in one pass (objects_ran.cpp).
  if (!old->mutating && dup_plain(kind, old, new_h, nullptr, 0, origin)) return {};
  // Hold the old object for the whole dup: another thread that modifies it waits until the
  // copies are made, so no copy callback ever sees a value whose delete callback already ran.
  const void* old_holder = old->mutating;  // this thread, further out, or nobody
  old->mutating = this_thread_token();
  // Snapshot what is to be copied, oldest first, pinning the keyvals. Attributes whose copy
  // action is NullCopy are skipped without further work.
  std::vector<CopyJob> jobs = job_pool_.take();
  if (const AttrTable* t = old->table.load(std::memory_order_relaxed)) {
    std::vector<std::uint32_t> indices = records_oldest_first(old);
    jobs.reserve(indices.size());
    for (const std::uint32_t i : indices) {
      const AttrRec& rec = t->recs[i];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      CopyJob job{key, nullptr, repr_of(rec), rec.value.load(std::memory_order_relaxed), 0};
      if (predefined_rec(rec)) {
        const PredefinedKeyval* p = find_predefined(key);
        if (!p || !p->copy_on_dup) continue;
      } else {
        KeyvalSlot* k = slot_of(key);
        if (k->spec.copy.action == CopyAction::NullCopy) continue;
        ++k->pins;
        job.keyval = k;
        if (k->spec.copy.action == CopyAction::User)
          job.value_in = translate(job.repr, job.word, cell_at(rec.cell()), k->spec.lang).word;
      }
      jobs.push_back(job);
    }
    index_pool_.give(std::move(indices));
  }
  const std::uint32_t new_slot = register_object(kind, new_h, kObjectNone, origin);
  if (new_slot == UINT32_MAX) {
    for (const CopyJob& job : jobs) unpin(job.keyval);
    job_pool_.give(std::move(jobs));
    old->mutating = old_holder;
    return {Status::CapacityExhausted, 0};
  }
  ObjectSlot* fresh = objects_.get(new_slot);
  fresh->mutating = this_thread_token();
  reserve(fresh, static_cast<std::uint32_t>(jobs.size()));

  Result failure;
  for (const CopyJob& job : jobs) {
    Binding repr = job.repr;
    std::uint64_t word = job.word;
    if (job.keyval && job.keyval->spec.copy.action == CopyAction::User) {
      const KeyvalSpec& spec = job.keyval->spec;  // (pinned: the slot keeps its spec)
      const CopyCall call{kind, old_h, job.key, spec.lang, spec.copy.fn, spec.extra_state, job.value_in};
      lk.unlock();
      std::uint64_t out = 0;
      int flag = 0, rc = 0;
      bool threw = false;
      {
        FrameGuard frame(this, old_slot);
        try {
          rc = config.invoker->copy(call, &out, &flag);
        } catch (...) {
          threw = true;
        }
      }
      if (config.observer)  // (the event is not even built without one)
        notify(CallbackEvent{CallbackEvent::Which::Copy, CallbackCause::Dup, kind, old_h, job.key, rc, flag, threw});
      lk.lock();
      if (threw || rc != 0) {
        failure = threw ? Result{Status::CallbackThrew, 0} : Result{Status::CallbackFailed, rc};
        break;
      }
      if (flag == 0) continue;
      repr = call.lang;
      word = normalise(repr, out);
    }
    const Status ps = put_copy(fresh, job.key, repr, word, job.keyval == nullptr, origin);
    if (ps != Status::Ok) {
      failure = {ps, 0};
      break;
    }
    if (job.keyval) ++job.keyval->attributes;
  }
  // The copying is over: rollback callbacks run for the new object only, so the old one may be
  // modified from inside them (docs/engine.md, "Callbacks and re-entrance").
  old->mutating = old_holder;
  if (!failure.ok()) {
    // Undo: delete what was copied (newest first), then forget the new object.
    delete_all(lk, new_slot, CallbackCause::DupRollback, false, nullptr);
    // Attributes whose rollback callback failed still reference their keyvals: drop them.
    drop_attribute_refs(fresh);
    unregister_object(new_slot);
  } else {
    fresh->mutating = nullptr;
  }
  for (const CopyJob& job : jobs) unpin(job.keyval);
  job_pool_.give(std::move(jobs));
  return failure;
}

Result Engine::Impl::free_object(ObjectKind kind, Handle h) {
  Lock lk(mu_);
  std::uint32_t slot;
  for (;;) {
    if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
    const Status s = find_object(kind, h, &slot);
    if (s != Status::Ok) return {s, 0};
    ObjectSlot* o = objects_.get(slot);
    if (o->flags & kObjectPredefined) return {Status::ObjectPredefined, 0};
    if (in_callback_for(this, slot)) return {Status::Reentrant, 0};
    if (o->mutating && o->mutating != this_thread_token()) {
      wait_turn(lk);
      continue;
    }
    if (o->mutating) return {Status::Reentrant, 0};
    break;
  }
  ObjectSlot* o = objects_.get(slot);
  if (free_plain(o, slot, nullptr, 0)) return {};  // nothing to call: the object dropped at once
  o->mutating = this_thread_token();
  const Result r = delete_all(lk, slot, CallbackCause::Free, true, nullptr);
  if (!r.ok()) {
    o->mutating = nullptr;
    return r;
  }
  unregister_object(slot);
  return {};
}

Result Engine::Impl::forget_object(ObjectKind kind, Handle h) {
  Lock lk(mu_);
  std::uint32_t slot;
  for (;;) {
    const Status s = find_object(kind, h, &slot);
    if (s != Status::Ok) return {s, 0};
    const ObjectSlot* o = objects_.get(slot);
    if (!o->mutating) break;
    if (o->mutating == this_thread_token()) return {Status::Reentrant, 0};
    wait_turn(lk);
  }
  drop_attribute_refs(objects_.get(slot));
  unregister_object(slot);
  return {};
}

// Releases the keyval references of every attribute of an object about to be unregistered.
void Engine::Impl::drop_attribute_refs(const ObjectSlot* o) {
  const AttrTable* t = o->table.load(std::memory_order_relaxed);
  if (!t) return;
  for (std::uint32_t i = 0; i <= t->mask; ++i) {
    const AttrRec& rec = t->recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (key == kEmptyKey || predefined_rec(rec)) continue;
    if (KeyvalSlot* ks = slot_of(key)) {
      --ks->attributes;
      unref_keyval(ks);
    }
  }
}

// Public interface.

Result Engine::create_object(ObjectKind kind, Handle handle, std::uint8_t flags, Origin origin) {
  return impl_->create_object(kind, handle, flags, origin);
}
Result Engine::dup_object(ObjectKind kind, Handle old_handle, Handle new_handle, Origin origin) {
  return impl_->dup_object(kind, old_handle, new_handle, origin);
}
Result Engine::free_object(ObjectKind kind, Handle handle, Origin) { return impl_->free_object(kind, handle); }
Result Engine::forget_object(ObjectKind kind, Handle handle) { return impl_->forget_object(kind, handle); }
std::vector<ObjectInfo> Engine::objects() const {
  Lock lk(impl_->mu_);
  std::vector<ObjectInfo> out;
  for (std::uint32_t i = 0; i < impl_->object_count_; ++i) {
    const ObjectSlot* o = impl_->objects_.find(i);
    if (!o || !o->live) continue;
    const AttrTable* t = o->table.load(std::memory_order_relaxed);
    out.push_back(ObjectInfo{o->kind, o->handle, o->flags, o->created_at, t ? t->count : 0u});
  }
  return out;
}
bool Engine::object_info(ObjectKind kind, Handle handle, ObjectInfo* out) const {
  Lock lk(impl_->mu_);
  std::uint32_t slot;
  if (!out || impl_->find_object(kind, handle, &slot) != Status::Ok) return false;
  const ObjectSlot* o = impl_->objects_.find(slot);
  const AttrTable* t = o->table.load(std::memory_order_relaxed);
  *out = ObjectInfo{o->kind, o->handle, o->flags, o->created_at, t ? t->count : 0u};
  return true;
}

}  // namespace attrcheck
