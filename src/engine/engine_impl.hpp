// Engine::Impl: the engine's state, its helpers (validation, storage, callbacks) and the
// declarations of its operations, which live in keyvals.cpp, attributes.cpp (set, get, delete:
// the hot paths), objects.cpp (create, dup, free) and finalize.cpp (finalize, introspection).
// The attribute tables and their record-level operations are its base, AttrStore
// (attr_store.hpp); the storage types both use, engine_storage.hpp.
// docs/engine.md is the contract; engine.cpp's opening comment the concurrency design.
// Internal to src/engine/.
#pragma once

#include "attr_store.hpp"
#include "engine_storage.hpp"

namespace attrcheck {
namespace engine_detail {}
using namespace engine_detail;  // NOLINT: the engine's own internals, in its own files only

struct Engine::Impl : AttrStore {
  explicit Impl(const EngineConfig& c) : config(c) {
    if (!config.invoker) {
      owned_invoker = std::make_unique<NativeInvoker>();
      config.invoker = owned_invoker.get();
    }
    Lock lk(mu_);
    WriteSection ws(seq_);
    map_.store(new_map(4), std::memory_order_release);
  }

  ~Impl() { delete map_.load(); }  // tables live in all_tables_, retired maps in retired_maps_

  EngineConfig config;
  std::unique_ptr<NativeInvoker> owned_invoker;

  mutable SpinLock mu_;
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<std::uint64_t> layout_{1};  // see Engine::layout_version()
  std::atomic<bool> finalized_{false};

  // Keyvals.
  ChunkedArray<KeyvalSlot, 10, (1u << kSlotBits) / 1024> keyvals_;  // index = slot number (0 unused)
  std::uint32_t keyval_slots_used_ = 1;
  std::deque<std::uint32_t> destroyed_slots_;
  std::uint32_t kept_slots_ = 0;  // slots freed with keep_slot, not yet renewed or released
  std::uint32_t keyval_capacity() const noexcept {  // the highest slot number create_keyval uses
    return config.max_keyvals && config.max_keyvals < kSlotMask ? config.max_keyvals : kSlotMask;
  }
  PredefinedKeyval predefined_[kMaxPredefined];
  std::atomic<std::uint32_t> predefined_count_{0};
  // The lowest and highest predefined id (mu_ held): a new keyval's id outside them is none of
  // them without the scan (Open MPI's are 0..11, far below any engine id).
  KeyvalId predefined_lo_ = INT32_MAX, predefined_hi_ = INT32_MIN;

  // Objects.
  ChunkedArray<ObjectSlot, 10, 4096> objects_;
  std::uint32_t object_count_ = 0;
  std::vector<std::uint32_t> free_object_slots_;
  std::atomic<HandleMap*> map_{nullptr};
  std::vector<std::unique_ptr<HandleMap>> retired_maps_;  // may still be read by a stale reader

  // Attribute tables and Fortran value cells: AttrStore (attr_store.hpp), the base.

  // ---- helpers: keyvals -------------------------------------------------------------------

  const PredefinedKeyval* find_predefined(KeyvalId id) const noexcept {
    const std::uint32_t n = predefined_count_.load(std::memory_order_acquire);
    for (std::uint32_t i = 0; i < n; ++i)
      if (predefined_[i].id.load(std::memory_order_relaxed) == id) return &predefined_[i];
    return nullptr;
  }

  // The slot a user keyval id lives in, whatever its state (nullptr if never allocated).
  KeyvalSlot* slot_of(KeyvalId id) const noexcept {
    if (id <= 0) return nullptr;
    const std::uint32_t slot = static_cast<std::uint32_t>(id) & kSlotMask;
    if (slot == 0) return nullptr;
    return keyvals_.find(slot);
  }

  // The slot of the keyval of an attribute set with a user keyval: the attribute holds it alive,
  // so its id is valid and its slot allocated, and the checks of slot_of are skipped. (A dup's
  // and a free's walks look one up per attribute: slot_of's range and chunk tests cost ~9
  // instructions each, MPICH emulate dup + free [user], callgrind.)
  KeyvalSlot* held_keyval(KeyvalId key) const noexcept {
    return keyvals_.at(static_cast<std::uint32_t>(key) & kSlotMask);
  }

  // Classifies a user keyval id (lock held). Ok: alive and not freed by the user.
  Status classify_keyval(KeyvalId id, KeyvalSlot** out) const noexcept {
    KeyvalSlot* k = slot_of(id);
    if (!k) return Status::KeyvalUnknown;
    const std::uint32_t gen = static_cast<std::uint32_t>(id) >> kSlotBits;
    if (k->id.load(std::memory_order_relaxed) == id && k->state.load(std::memory_order_relaxed) != kKeyEmpty) {
      *out = k;
      return k->state.load(std::memory_order_relaxed) == kKeyAlive ? Status::Ok : Status::KeyvalFreed;
    }
    if (gen >= 1 && gen < k->generation) return Status::KeyvalFreed;
    return Status::KeyvalUnknown;
  }

  // How an attribute call uses its keyval: set and delete refuse predefined keyvals; delete also
  // accepts a keyval the user freed while attributes still use it (MPI_COMM_FREE_KEYVAL: "the
  // remaining references need to be explicitly freed ... via calls to MPI_COMM_DELETE_ATTR"), and
  // so does a set checked when it began (SetEntered: Engine::set_attr_entered), which its own
  // callback may have freed the keyval since.
  enum class KeyUse : std::uint8_t { Get, Set, Delete, SetEntered };

  // Keyval validation for attribute calls (lock held).
  // (always_inline: set and delete take it on every call; GCC left it out of line.)
  [[gnu::always_inline]] Status check_keyval(ObjectKind kind, KeyvalId id, KeyUse use, KeyvalSlot** user,
                      const PredefinedKeyval** pre) const noexcept {
    *user = nullptr;
    *pre = nullptr;
    const bool modify = use != KeyUse::Get;
    if (id == config.keyval_invalid) return Status::KeyvalInvalid;
    KeyvalSlot* k = nullptr;
    Status s = classify_keyval(id, &k);
    if (s == Status::KeyvalFreed && (use == KeyUse::Delete || use == KeyUse::SetEntered) && k &&
        k->state.load(std::memory_order_relaxed) == kKeyFreed)
      s = Status::Ok;  // freed by the user, still alive through its attributes
    if (s != Status::Ok) {
      // Predefined ids are never engine ids (create_keyval skips them): only now look them up.
      if (const PredefinedKeyval* p = find_predefined(id)) {
        if (p->kind.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(kind))
          return Status::KeyvalKindMismatch;
        if (modify) return Status::KeyvalPredefined;
        *pre = p;
        return Status::Ok;
      }
      return s;
    }
    if (k->spec.kind != kind) return Status::KeyvalKindMismatch;
    *user = k;
    return Status::Ok;
  }

  [[gnu::noinline]] void unref_keyval_out_of_line(KeyvalSlot* k) { unref_keyval(k); }
  void unref_keyval(KeyvalSlot* k) {
    if (k->state.load(std::memory_order_relaxed) == kKeyFreed && k->attributes == 0 && k->pins == 0) {
      WriteSection ws(seq_, &layout_);
      k->state.store(kKeyDestroyed, std::memory_order_relaxed);
      if (!k->kept)  // a kept slot waits for renew_keyval or release_keyval_slot (keyvals.cpp)
        destroyed_slots_.push_back(static_cast<std::uint32_t>(k->id.load(std::memory_order_relaxed)) & kSlotMask);
    }
  }

  // ---- helpers: objects -------------------------------------------------------------------

  static HandleMap* new_map(std::uint32_t log2cap) { return new HandleMap(log2cap); }

  // Lock held. Ok with *slot set, or ObjectNull / ObjectUnknown.
  Status find_object(ObjectKind kind, Handle h, std::uint32_t* slot) const noexcept {
    if (h == config.null_handle[static_cast<int>(kind)]) return Status::ObjectNull;
    const std::uint32_t s = map_.load(std::memory_order_relaxed)->find(kind, h);
    if (s == UINT32_MAX) return Status::ObjectUnknown;
    *slot = s;
    return Status::Ok;
  }

  ObjectSlot* object(std::uint32_t slot) noexcept { return objects_.get(slot); }

  std::uint32_t register_object(ObjectKind kind, Handle h, std::uint8_t flags, Origin origin) {
    std::uint32_t slot;
    if (config.max_objects && object_count_ - free_object_slots_.size() >= config.max_objects) return UINT32_MAX;
    if (!free_object_slots_.empty()) {
      slot = free_object_slots_.back();
      free_object_slots_.pop_back();
    } else {
      if (object_count_ >= decltype(objects_)::kCapacity) return UINT32_MAX;
      slot = object_count_++;
    }
    ObjectSlot* o = objects_.get(slot);
    o->index = slot;
    o->handle = h;
    o->kind = kind;
    o->flags = flags;
    o->live = true;
    o->mutating = nullptr;
    o->held = false;
    o->created_at = origin;
    o->next_order = 1;
    o->records_changed();
    o->copy_plan_ok = false;
    o->del_plan_ok = false;

    HandleMap* m = map_.load(std::memory_order_relaxed);
    WriteSection ws(seq_, &layout_);
    if ((m->count + 1) * 2 > m->mask + 1) {
      HandleMap* bigger = new_map(64 - m->shift + 1);
      for (std::uint32_t i = 0; i <= m->mask; ++i) {
        const std::uint32_t tag = m->entries[i].tag.load(std::memory_order_relaxed);
        if (tag) map_insert(bigger, m->entries[i].handle.load(std::memory_order_relaxed), tag);
      }
      map_.store(bigger, std::memory_order_release);
      retired_maps_.emplace_back(m);
      m = bigger;
    }
    map_insert(m, h, HandleMap::tag_of(kind, slot));
    return slot;
  }

  static void map_insert(HandleMap* m, Handle h, std::uint32_t tag) noexcept {
    const auto kind = static_cast<ObjectKind>((tag & 3) - 1);
    std::uint32_t i = m->home(kind, h);
    while (m->entries[i].tag.load(std::memory_order_relaxed) != 0) i = (i + 1) & m->mask;
    m->entries[i].handle.store(h, std::memory_order_relaxed);
    m->entries[i].tag.store(tag, std::memory_order_relaxed);
    ++m->count;
  }

  // Removes the object from the handle map and returns its storage to the pools (lock held).
  void unregister_object(std::uint32_t slot) {
    ObjectSlot* o = objects_.get(slot);
    HandleMap* m = map_.load(std::memory_order_relaxed);
    WriteSection ws(seq_, &layout_);
    std::uint32_t hole = 0;
    if (m->find(o->kind, o->handle, &hole) != UINT32_MAX) {
      // Backward-shift deletion keeps every probe sequence unbroken.
      std::uint32_t j = hole;
      for (;;) {
        j = (j + 1) & m->mask;
        const std::uint32_t tag = m->entries[j].tag.load(std::memory_order_relaxed);
        if (tag == 0) break;
        const Handle hj = m->entries[j].handle.load(std::memory_order_relaxed);
        const std::uint32_t k = m->home(static_cast<ObjectKind>((tag & 3) - 1), hj);
        const bool stays = (hole <= j) ? (hole < k && k <= j) : (hole < k || k <= j);
        if (stays) continue;
        m->entries[hole].handle.store(hj, std::memory_order_relaxed);
        m->entries[hole].tag.store(tag, std::memory_order_relaxed);
        hole = j;
      }
      m->entries[hole].tag.store(0, std::memory_order_relaxed);
      --m->count;
    }
    if (AttrTable* t = o->table.load(std::memory_order_relaxed)) {
      for (std::uint32_t i = 0; i <= t->mask; ++i) {
        if (t->recs[i].key.load(std::memory_order_relaxed) != kEmptyKey) release_cell(t->recs[i]);
        t->recs[i].clear();
      }
      t->count = 0;
      o->table.store(nullptr, std::memory_order_relaxed);
      table_pool_[32 - t->shift].push_back(t);
    }
    o->live = false;
    free_object_slots_.push_back(slot);
  }

  // ---- helpers: attribute records (the tables themselves: AttrStore) ---------------------

  // Gives an empty object a table that holds `n` attributes without growing.
  void reserve(ObjectSlot* o, std::uint32_t n) {
    if (n == 0 || o->table.load(std::memory_order_relaxed)) return;
    std::uint32_t log2cap = 2;
    while ((n + 1) * 4 > (1u << log2cap) * 3) ++log2cap;
    WriteSection ws(seq_);
    o->table.store(take_table(log2cap), std::memory_order_release);
  }

  // Erases attribute `rec` of object `o` and drops the reference it held on its keyval `k` (lock
  // held): what a delete without a callback to wait for, or after its callback succeeded, ends
  // with. One scope rule: the erase's write section is closed before the keyval may be destroyed
  // (unref_keyval opens its own; sections do not nest). The keyval is only looked at further
  // when the user freed it (its last attribute then destroys it).
  [[gnu::always_inline]] void drop_attr(ObjectSlot* o, AttrRec* rec, KeyvalSlot* k) {
    {
      WriteSection ws(seq_);
      erase_attr(o, rec);
    }
    --k->attributes;
    if (__builtin_expect(k->state.load(std::memory_order_relaxed) == kKeyFreed, 0)) unref_keyval_out_of_line(k);
  }

  // Sets (inserting or overwriting) an attribute record without callbacks (lock held).
  Status put(ObjectSlot* o, KeyvalId key, Binding repr, std::uint64_t word, bool predefined, Origin origin) {
    return put_at(o, find_attr(o->table.load(std::memory_order_relaxed), key), key, repr, word, predefined, origin);
  }
  // put() where the record for `key` is known: `rec`, or nullptr if there is none.
  Status put_at(ObjectSlot* o, AttrRec* rec, KeyvalId key, Binding repr, std::uint64_t word, bool predefined,
                Origin origin) {
    WriteSection ws(seq_);
    if (rec) {
      release_cell(*rec);
    } else {
      rec = insert_slot(o, key);
    }
    if (!fill(o, rec, key, repr, word, predefined, origin)) {
      erase_attr(o, rec);
      return Status::CapacityExhausted;
    }
    return Status::Ok;
  }

  // ---- waiting and callbacks ---------------------------------------------------------------

  // An object held for this thread (Engine::hold_object, o->mutating is this thread's): the
  // change about to be made takes the hold over and ends it (lock held). False: not held.
  static bool held_here(const ObjectSlot* o) noexcept { return o->held && o->mutating == this_thread_token(); }
  static bool take_hold(ObjectSlot* o) noexcept {
    if (!o->held) return false;
    o->held = false;
    o->mutating = nullptr;
    return true;
  }

  // Another thread is running callbacks for an object this call wants: let it finish.
  static void wait_turn(Lock& lk) {
    lk.unlock();
    std::this_thread::yield();
    lk.lock();
  }

  [[gnu::noinline]] void notify(const CallbackEvent& e) {
    if (!config.observer) return;
    try {
      config.observer->on_callback(e);
    } catch (...) {
      // An observer must not be able to break the engine.
    }
  }

  // A snapshot of what a delete callback needs, taken under the lock.
  struct DeleteJob {
    KeyvalId key;
    KeyvalSlot* keyval;  // pinned; nullptr for predefined attributes
    DeleteCall call;
    bool user;           // a User delete action: call it
  };

  DeleteJob make_delete_job(ObjectSlot* o, AttrRec* rec, CallbackCause cause) {
    const KeyvalId key = rec->key.load(std::memory_order_relaxed);
    if (!predefined_rec(*rec)) {
      // Attributes hold their keyval alive, so the id always resolves to its slot.
      KeyvalSlot* ks = slot_of(key);
      if (ks && ks->id.load(std::memory_order_relaxed) == key) return make_delete_job(o, rec, ks, cause);
    }
    DeleteJob job{};
    job.key = key;
    return job;
  }

  // make_delete_job for an attribute whose keyval's slot `k` (live, or kept by the attribute) the
  // caller already holds: set and delete through a cursor skip the lookup (~25 instructions,
  // callgrind); the overload above looks it up and comes here.
  DeleteJob make_delete_job(ObjectSlot* o, AttrRec* rec, KeyvalSlot* k, CallbackCause cause) {
    DeleteJob job;
    job.key = rec->key.load(std::memory_order_relaxed);
    job.keyval = k;
    ++k->pins;
    job.user = k->spec.del.action == DeleteAction::User;
    const Binding repr = repr_of(*rec);
    std::uint64_t word = rec->value.load(std::memory_order_relaxed);
    if (repr != Binding::C || k->spec.lang != Binding::C) word = callback_word(*rec, k);
    job.call = DeleteCall{o->kind, o->handle, job.key, k->spec.lang, k->spec.del.fn, k->spec.extra_state, word, cause, repr};
    return job;
  }

  // Runs a delete callback with the lock released. Returns Ok, CallbackFailed or CallbackThrew.
  // (Inlined into its callers, themselves out of line: a set replacing a value with a user delete
  // callback ~20 instructions less, callgrind.)
  [[gnu::always_inline]] Result run_delete(Lock& lk, std::uint32_t slot, const DeleteJob& job) {
    if (!job.user) return {};
    lk.unlock();
    const Result result = invoke_delete(slot, job.call);
    lk.lock();
    return result;
  }
  // Calls delete callback `call` for the object in `slot` (the caller has released the lock) and
  // tells the observer: what run_delete and run_user_delete share. Returns Ok, CallbackFailed or
  // CallbackThrew.
  [[gnu::always_inline]] Result invoke_delete(std::uint32_t slot, const DeleteCall& call) {
    bool threw = false;
    int rc = 0;
    {
      FrameGuard frame(this, slot);
      try {
        rc = config.invoker->del(call);
      } catch (...) {
        threw = true;
      }
    }
    if (config.observer)  // (the event is not even built without one: ~13 instructions a callback)
      notify(CallbackEvent{CallbackEvent::Which::Delete, call.cause, call.kind, call.object, call.keyval, rc, 0, threw});
    if (__builtin_expect(threw, 0)) return {Status::CallbackThrew, 0};
    if (__builtin_expect(rc != 0, 0)) return {Status::CallbackFailed, rc};
    return {};
  }

  void unpin(KeyvalSlot* k) {
    if (!k) return;
    --k->pins;
    unref_keyval(k);
  }

  // Deletes attribute `key` of an object that this thread is marked as mutating (lock held):
  // runs the callback, then removes the record if it succeeded.
  Result delete_one(Lock& lk, std::uint32_t slot, ObjectSlot* o, KeyvalId key, CallbackCause cause) {
    AttrRec* rec = find_attr(o->table.load(std::memory_order_relaxed), key);
    if (!rec) return {};
    return run_delete_job(lk, slot, o, rec, make_delete_job(o, rec, cause));
  }
  // delete_one once the job is made for record `rec`: runs it, then removes the record if it
  // succeeded. Still `rec` unless the engine changed while the callback ran (every change moves
  // seq_): then looked up again.
  Result run_delete_job(Lock& lk, std::uint32_t slot, ObjectSlot* o, AttrRec* rec, const DeleteJob& job) {
    const std::uint64_t before = seq_.load(std::memory_order_relaxed);
    const Result r = run_delete(lk, slot, job);
    if (r.ok()) {
      if (seq_.load(std::memory_order_relaxed) != before) rec = find_attr(o->table.load(std::memory_order_relaxed), job.key);
      if (rec) {
        WriteSection ws(seq_);
        erase_attr(o, rec);
        if (job.keyval) --job.keyval->attributes;
      }
    }
    unpin(job.keyval);
    return r;
  }

  // Working space of the operations that go through an object's attributes in set order (lock
  // held while taking and giving back).
  VectorPool<std::uint64_t> scratch_pool_;
  VectorPool<KeyvalId> key_pool_;

  // A dup's plan (CopyStep: engine_storage.hpp) and calls, when the object does not keep them.
  VectorPool<CopyStep> step_pool_;
  VectorPool<CopyCall> call_pool_;
  VectorPool<CopyOutcome> outcome_pool_;
  // The copy callbacks of a dup (the lock released): in one run of the invoker, or with an
  // observer one at a time, each told to it as it returns. Returns how many ran (objects.cpp).
  std::size_t run_copies(const CopyCall* calls, std::size_t n, CopyOutcome* out, bool* as_given);

  // The indices into the object's table of its attributes, oldest first (lock held): the list the
  // object keeps, made again only if its records changed since it was last made. Valid until they
  // change: an object a dup or free walks is marked mutating by this thread, so none of its
  // records changes during the walk (other threads wait, this thread's callbacks are refused).
  // (A communicator dup'd again and again, and each copy freed: no sort or placing pass on either
  // side; records_in_set_order took ~85 instructions an attribute of a dup + free, MPICH emulate
  // [user], callgrind.)
  const std::vector<std::uint32_t>& set_order_of(ObjectSlot* o) {
    if (!o->set_order_ok) {
      o->copy_plan_ok = false;  // (made from the list)
      o->del_plan_ok = false;
      std::vector<std::uint64_t> scratch = scratch_pool_.take();
      records_in_set_order(o->table.load(std::memory_order_relaxed), &scratch, &o->set_order);
      scratch_pool_.give(std::move(scratch));
      o->set_order_ok = true;
    }
    return o->set_order;
  }

  // The object's attribute keys, newest first (lock held; give the vector back to key_pool_).
  std::vector<KeyvalId> keys_newest_first(ObjectSlot* o) {
    const std::vector<std::uint32_t>& order = set_order_of(o);
    std::vector<KeyvalId> keys = key_pool_.take();
    keys.reserve(order.size());
    const AttrTable* t = o->table.load(std::memory_order_relaxed);
    for (auto i = order.rbegin(); i != order.rend(); ++i) keys.push_back(t->recs[*i].key.load(std::memory_order_relaxed));
    return keys;
  }

  // Deletes all attributes, newest first. Stops at the first failure when `stop`, else records
  // failures in `failures` and goes on. Lock held, object marked mutating by this thread.
  Result delete_all(Lock& lk, std::uint32_t slot, CallbackCause cause, bool stop,
                    std::vector<FinalizeReport::Failure>* failures) {
    ObjectSlot* o = objects_.get(slot);
    std::vector<KeyvalId> keys = keys_newest_first(o);
    Result first;
    for (const KeyvalId key : keys) {
      const Result r = delete_one(lk, slot, o, key, cause);
      if (r.ok()) continue;
      if (first.ok()) first = r;
      if (failures) failures->push_back({o->kind, o->handle, key, r});
      if (stop) break;
    }
    key_pool_.give(std::move(keys));
    return first;
  }

  // ---- operations ----------------------------------------------------------------------------

  Result create_keyval(const KeyvalSpec& spec, KeyvalId* out, Origin origin);

  Result free_keyval(ObjectKind kind, KeyvalId* keyval, Origin origin, bool keep_slot);

  Result renew_keyval(KeyvalId old_id, const KeyvalSpec& spec, KeyvalId* out, Origin origin);

  void release_keyval_slot(KeyvalId old_id);

  void start_keyval(KeyvalSlot* k, KeyvalId id, const KeyvalSpec& spec, Origin origin);
  Status admit_keyval(const KeyvalSpec& spec, const KeyvalId* out) const;
  bool reserved_keyval_id(KeyvalId id) const;

  Result register_predefined(ObjectKind kind, KeyvalId id, const char* name, bool copy_on_dup);

  Result create_object(ObjectKind kind, Handle h, std::uint8_t flags, Origin origin);

  // Validates the object of a modifying call and waits while another thread runs callbacks for
  // it (lock held; loops until it can proceed). Defined here, in the class: set and delete share
  // it, and it is inlined into each (out of line it costs ~20 instructions a call more).
  Status acquire_object(Lock& lk, ObjectKind kind, Handle h, KeyvalId key, bool with_key,
                          std::uint32_t* slot, KeyvalSlot** k, const PredefinedKeyval** pre,
                          KeyUse use = KeyUse::Set) {
    for (;;) {
      if (finalized_.load(std::memory_order_relaxed)) return Status::Finalized;
      Status s = find_object(kind, h, slot);
      if (s != Status::Ok) return s;
      if (with_key) {
        s = check_keyval(kind, key, use, k, pre);
        if (s != Status::Ok) return s;
      }
      if (in_callback_for(this, *slot)) return Status::Reentrant;
      ObjectSlot* o = objects_.get(*slot);
      if (o->mutating && o->mutating != this_thread_token()) {
        wait_turn(lk);
        continue;
      }
      // This thread, further out: still re-entrant; unless another thread held the object for
      // this one (Engine::hold_object): the change takes the hold over.
      if (o->mutating && !take_hold(o)) return Status::Reentrant;
      return Status::Ok;
    }
  }

  Result set_attr(ObjectKind kind, Handle h, KeyvalId key, Binding from, std::uint64_t value, Origin origin,
                  KeyUse use = KeyUse::Set);

  // The end of a set, after the old value's delete callback (if any) succeeded (lock held):
  // stores the value in `rec` (the attribute's record; nullptr: a new one), the object's newest.
  [[gnu::always_inline]] Result store_set(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec, KeyvalId key, Binding from, std::uint64_t value,
                   Origin origin) {
    const bool existed = rec != nullptr;
    const Status ps = put_at(o, rec, key, from, value, false, origin);
    if (ps != Status::Ok) {  // out of cells: put() removed the record
      if (existed) {
        --k->attributes;
        unref_keyval(k);
      }
      return {ps, 0};
    }
    if (!existed) ++k->attributes;
    return {};
  }

  // set_attr and delete_attr once the object and keyval (and for a delete the attribute) are
  // found and the call may proceed (lock held).
  Result set_located(ObjectSlot* o, KeyvalSlot* k, KeyvalId key, Binding from, std::uint64_t value,
                     Origin origin);
  Result run_user_delete(ObjectSlot* o, KeyvalSlot* k, AttrRec** rec, CallbackCause cause);
  std::uint64_t callback_word(const AttrRec& r, const KeyvalSlot* k) const;
  Result delete_with_callback(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec);
  bool delete_at_with_callback(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec, AtOutcome* out);
  Result delete_located(ObjectSlot* o, KeyvalSlot* k, AttrRec* rec);
  // The cursor's object, if the cursor still stands for a modifying call's checks (the layout
  // reads the same: no object or keyval came or went) and the call may proceed without waiting
  // (no callback of this thread runs for the object, no thread is changing it); else nullptr
  // (lock held).
  // (No test of finalized_: finalize moves the layout, and no cursor is found after it.)
  ObjectSlot* cursor_object(const SetCursor& c) const {
    if (!c.object || layout_.load(std::memory_order_relaxed) != c.layout) return nullptr;
    auto* o = static_cast<ObjectSlot*>(const_cast<void*>(c.object));
    if (o->mutating || (t_depth > 0 && in_callback_for(this, o->index))) return nullptr;
    return o;
  }
  // Engine::set_attr_at, Engine::delete_attr_at.
  bool set_attr_at(const SetCursor& c, Binding from, std::uint64_t value, Origin origin, AtOutcome* out);
  bool delete_attr_at(const SetCursor& c, AtOutcome* out);

  // Engine::find_set_cursor: set_attr's checks, remembered.
  bool find_set_cursor(ObjectKind kind, Handle h, KeyvalId key, std::uint64_t layout, SetCursor* out,
                       bool* user_delete) const;

  // Engine::delete_attr_ran: delete_attr for a delete whose callback already ran elsewhere.
  bool delete_attr_ran(const SetCursor& c, const RanDelete* ran, std::uint64_t* version);
  // Whether `ran` is the delete callback call the standard requires for attribute `rec` of
  // object `o` under keyval `k` (a user delete function): same object and keyval, passed the
  // attribute's value, and it succeeded (lock held). Inline, with the common record, a C value
  // for a C callback, compared without translating it: a shadow free checks every attribute
  // with it (free_plain_pass: ~15 instructions an attribute less than a call, MPICH shadow free
  // of 64 attributes [user], callgrind).
  [[gnu::always_inline]] bool ran_as_required(const ObjectSlot* o, const KeyvalSlot* k, const AttrRec& rec,
                                              const RanDelete& ran) const {
    if (ran.rc != 0 || ran.object != o->handle || ran.keyval != rec.key.load(std::memory_order_relaxed)) return false;
    const Binding repr = repr_of(rec);
    if (__builtin_expect(repr == Binding::C && k->spec.lang == Binding::C, 1))
      return ran.value == rec.value.load(std::memory_order_relaxed);
    // A Fortran-set value reaches a C callback as the address of wherever its holder stores it,
    // which only the holder knows.
    if (repr != Binding::C && k->spec.lang == Binding::C) return false;
    return ran.value == translate(repr, rec.value.load(std::memory_order_relaxed), nullptr, k->spec.lang).word;
  }
  // Engine::set_attr_ran: set_attr for a set whose delete callback already ran elsewhere. The
  // cursor stands for set_attr's object and keyval checks while the layout reads the same; the
  // rest are made here. Nothing waits and nothing is called: anything other than the plain case
  // (no callbacks running for the object, exactly the delete callback the standard requires here
  // and it succeeded) answers false and changes nothing.
  // (after_callback: Engine::set_attr_after_delete, which also takes a cursor whose layout moved.)
  bool set_attr_ran(const SetCursor& c, Binding from, std::uint64_t value, Origin origin, const RanDelete* ran,
                    std::uint64_t* version, bool after_callback = false);
  // Engine::c_delete_function.
  bool c_delete_function(const SetCursor& c, void** fn, std::uint64_t* extra_state) const;

  // The checks of a call that reads (get) or may delete an attribute (lock held): Ok with the
  // attribute's record (nullptr if not set), or why the call is refused.
  Status locate_attr(ObjectKind kind, Handle h, KeyvalId key, KeyUse use, const AttrRec** rec) const;

  Result get_attr_locked(ObjectKind kind, Handle h, KeyvalId key, Binding as, void* out, int* flag,
                         bool* truncated) const;

  // The lock-free read: no store to shared memory, validated by the sequence counter.
  Result get_attr(ObjectKind kind, Handle h, KeyvalId key, Binding as, void* out, int* flag,
                  bool* truncated) const;

  // Engine::check_delete: delete_attr's checks, nothing changed.
  Result check_delete(ObjectKind kind, Handle h, KeyvalId key, int* present) const;

  Result delete_attr(ObjectKind kind, Handle h, KeyvalId key);

  Result install_predefined(ObjectKind kind, Handle h, KeyvalId key, Binding repr, std::uint64_t value);

  Result dup_object(ObjectKind kind, Handle old_h, Handle new_h, Origin origin);

  Result free_object(ObjectKind kind, Handle h);
  Result delete_each(Lock& lk, std::uint32_t slot, ObjectSlot* o);  // free_object's deletes (objects.cpp)
  // delete_each's run of the invoker: where it stands, and its step between two callbacks.
  struct FreeRun {
    Impl* impl;
    ObjectSlot* o;
    AttrTable* t;
    const std::uint32_t* order;  // the indices into t->recs of its attributes, oldest first
    const DeleteStep* plan;      // or its plan (the same attributes in the same order), if it keeps one
    bool quick;                  // free_step's usual step may be taken: a plan, no observer, no lock
    std::size_t next;            // how many of them are still to look at (from the end)
    // The callback running: its record, its keyval and its call (`call`, or its plan's). (In a
    // quick run, the plan's at `next`: free_step does not write them, free_step_general reads them.)
    AttrRec* rec;
    KeyvalSlot* k;
    const DeleteCall* cur;
    DeleteCall call;
    Result result;
  };
  // Marks attribute `rec` of table `t` of object `o`, which a free holds, deleted (lock held):
  // kDeadKey in its key, under a write section (lookups from then on find it absent; the
  // version moves, so no cached answer outlives it).
  // (A Fortran value's record, whose cell goes back too, out of line: with no call inside the
  // section the compiler keeps it in registers; ~15 instructions an attribute, MPICH emulate dup
  // + free [user] 31.7k -> 30.8k, callgrind.)
  void kill_attr(ObjectSlot* o, AttrTable* t, AttrRec* rec) {
    if (__builtin_expect(rec->cell() != 0, 0)) return kill_attr_with_cell(o, t, rec);
    WriteSection ws(seq_);
    mark_dead(o, t, rec);
  }
  [[gnu::noinline]] void kill_attr_with_cell(ObjectSlot* o, AttrTable* t, AttrRec* rec) {
    WriteSection ws(seq_);
    release_cell(*rec);
    mark_dead(o, t, rec);
  }
  bool free_next(FreeRun* r);  // (inline: objects.cpp)
  // The object's free plan from its list (lock held; the list valid): ObjectSlot::del_plan.
  void make_delete_plan(ObjectSlot* o);
  static const DeleteCall* free_step(void* ctx, int rc, bool threw);
  [[gnu::noinline]] static const DeleteCall* free_step_general(void* ctx, int rc, bool threw);

  // Engine::dup_object_ran, Engine::free_object_ran (objects_ran.cpp).
  bool dup_object_ran(ObjectKind kind, Handle old_h, Handle new_h, const RanCopy* ran, std::size_t n, Origin origin);
  bool free_object_ran(ObjectKind kind, Handle h, const RanDelete* ran, std::size_t n);
  // Their work once the objects are found and may be used (lock held; `old` / `o` not mutating):
  // with n == 0, a dup or free with no user callback to call. False: nothing changed.
  bool dup_plain(ObjectKind kind, ObjectSlot* old, Handle new_h, const RanCopy* ran, std::size_t n, Origin origin);
  bool free_plain(ObjectSlot* o, std::uint32_t slot, const RanDelete* ran, std::size_t n);
  // (It writes the old object's flat plan in `flat`, sized for its attributes: with runs, the
  // run plan of the n runs; and in `flat_free` whether exactly the attributes with runs have a
  // user delete function.)
  template <bool kRuns>
  int copy_same_slots(const AttrTable* t, AttrTable* ct, const RanCopy* ran, const std::uint32_t* run_of,
                      std::uint32_t n, Origin origin, FlatStep* flat, bool* flat_free);
  // A copy whose records are the old table's n, as a plan lists them (CopyStep, FlatStep: a slot
  // and a keyval, nullptr for a predefined attribute): each into the same slot of the clean table
  // `ct`, set where the dup was, counted on its keyval. (dup_object's quick copy, dup_flat.)
  template <typename Step>
  static void place_as_is(const Step* steps, std::size_t n, const AttrTable* t, AttrTable* ct, Origin origin) {
    const AttrRec* const src = t->recs.get();
    AttrRec* const out = ct->recs.get();
    for (std::size_t i = 0; i < n; ++i) {
      const Step& st = steps[i];
      out[st.slot].copy_as_dup(src[st.slot], origin);
      if (st.keyval) ++st.keyval->attributes;
    }
    ct->count = static_cast<std::uint32_t>(n);
  }
  // dup_plain and free_plain through an object's flat plan (ObjectSlot::flat_plan).
  bool dup_flat(ObjectKind kind, ObjectSlot* old, const AttrTable* t, Handle new_h, Origin origin);
  // ... and with runs, through its run plan (false: nothing changed).
  bool dup_runs(ObjectKind kind, ObjectSlot* old, const AttrTable* t, Handle new_h, const RanCopy* ran, std::size_t n,
                Origin origin);
  bool runs_as_planned(const ObjectSlot* o, const AttrTable* t, const RanDelete* ran, std::size_t n) const;
  void give_flat_plan(const ObjectSlot* old, ObjectSlot* fresh, std::uint32_t n);
  void free_flat(ObjectSlot* o, AttrTable* t);
  template <bool kRuns>
  bool free_plain_pass(ObjectSlot* o, AttrTable* t, const RanDelete* ran, const std::uint32_t* run_of,
                       bool* some_unused);
  // Releases the keyval references of a table's attributes and clears it (lock held).
  void drop_table_refs(AttrTable* t);
  // For each record of table `t`, the index of the run in `ran` that matched it (UINT32_MAX: none);
  // false if a run matches no record or one that another run matched already (lock held).
  template <typename Run>
  bool match_runs(const AttrTable* t, const Run* ran, std::size_t n, std::uint32_t* run_of);
  // Working space of dup_plain / free_plain: a code per slot of a table (lock held).
  std::vector<std::uint32_t> codes_;
  std::uint32_t* slot_codes(std::uint32_t capacity);

  Result forget_object(ObjectKind kind, Handle h);
  // Engine::hold_object, Engine::release_hold.
  bool hold_object(ObjectKind kind, Handle h, const void* holder);
  void release_hold(ObjectKind kind, Handle h);

  // Releases the keyval references of every attribute of an object about to be unregistered.
  void drop_attribute_refs(const ObjectSlot* o);

  FinalizeReport finalize(const FinalizeOptions& options);

  // ---- introspection -----------------------------------------------------------------------

  KeyvalInfo info_of(const KeyvalSlot& k) const;

  bool keyval_info(KeyvalId id, KeyvalInfo* out) const;

  template <typename Pred>
  std::vector<KeyvalInfo> keyvals_where(Pred pred) const;

  void collect_attributes(const ObjectSlot& o, std::vector<AttributeInfo>* out) const;
};

}  // namespace attrcheck
