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
  // No user copy callback to call: the copy made in one pass (objects_ran.cpp). (Not tried when
  // the object's kept plan has a copy callback to call: ~160 instructions a dup.)
  if (!old->mutating && !(old->set_order_ok && old->copy_plan_ok && !old->copy_calls.empty()) &&
      dup_plain(kind, old, new_h, nullptr, 0, origin))
    return {};
  // Hold the old object for the whole dup: another thread that modifies it waits until the
  // copies are made, so no copy callback ever sees a value whose delete callback already ran.
  // Nothing changes its table meanwhile (this thread's callbacks run under a frame for it: their
  // changes to it are refused), so its records are read in place, in set order, and they hold
  // their keyvals alive (a callback that frees one only marks it freed): nothing is snapshotted
  // or pinned. (MPICH emulate [user], 64 attributes: ~80 instructions an attribute less than
  // snapshotting jobs and pinning, callgrind.)
  const void* old_holder = old->mutating;  // this thread, further out, or nobody
  const std::uint32_t new_slot = register_object(kind, new_h, kObjectNone, origin);
  if (new_slot == UINT32_MAX) return {Status::CapacityExhausted, 0};
  old->mutating = this_thread_token();
  ObjectSlot* fresh = objects_.get(new_slot);
  fresh->mutating = this_thread_token();
  const AttrTable* t = old->table.load(std::memory_order_relaxed);
  // (Its list, which stays as it is while the copies are made: see set_order_of.)
  const std::vector<std::uint32_t>& order = set_order_of(old);
  const std::size_t n = order.size();

  // 1. What becomes of each attribute, in set order: copied as it is (MPI_*_DUP_FN, a predefined
  // attribute the dup carries), not copied, or as its user copy callback says. Read in place:
  // nothing changes the records of the old object until the dup is over (set_order_of).
  // (Sized once and written in place, not pushed back: part of the saving measured below.)
  // The plan is the object's, kept while its list is (ObjectSlot::copy_plan_ok): a dup of an
  // object dup'd before, whose attributes did not change since, plans nothing. A dup made from
  // a callback of another dup or a free of the object (which holds it) plans in vectors of its
  // own. (A communicator dup'd again and again: MPICH emulate dup + free [user], 64 attributes,
  // ~70 instructions an attribute, 30.4k -> 25.9k, callgrind.)
  const bool keep_plan = old_holder == nullptr;
  std::vector<CopyStep> steps;
  std::vector<CopyCall> calls;
  std::vector<CopyStep>& step_list = keep_plan ? old->copy_steps : steps;
  std::vector<CopyCall>& call_list = keep_plan ? old->copy_calls : calls;
  // Whether every attribute is a C value that the dup copies (as it is, or by its C callback): then
  // a copy that every callback made as it was given is the old record again (below).
  bool plain_plan = keep_plan && old->copy_plan_plain;
  if (!keep_plan || !old->copy_plan_ok) {
    if (!keep_plan) {
      steps = step_pool_.take_sized(n);
      calls = call_pool_.take_sized(n);
    } else {
      if (step_list.size() < n) step_list.resize(n);
      if (call_list.size() < n) call_list.resize(n);
    }
    CopyStep* const step = step_list.data();
    CopyCall* const call_at = call_list.data();
    std::size_t n_steps = 0, n_calls = 0;
    bool all_c = true;
    for (std::size_t j = 0; j < n; ++j) {
      const std::uint32_t slot = order[j];
      const AttrRec& rec = t->recs[slot];
      const KeyvalId key = rec.key.load(std::memory_order_relaxed);
      const Binding repr = repr_of(rec);
      const std::uint64_t word = rec.value.load(std::memory_order_relaxed);
      KeyvalSlot* k = nullptr;
      bool call = false;
      if (predefined_rec(rec)) {
        const PredefinedKeyval* p = find_predefined(key);
        if (!p || !p->copy_on_dup) continue;
      } else {
        k = held_keyval(key);
        const CopyAction action = k->spec.copy.action;
        if (action == CopyAction::NullCopy) continue;
        if (action == CopyAction::User) {
          const KeyvalSpec& spec = k->spec;  // (alive: the old object's attribute holds it)
          const std::uint64_t value_in =
              repr == Binding::C && spec.lang == Binding::C ? word : callback_word(rec, k);
          call_at[n_calls++] = CopyCall{kind, old_h, key, spec.lang, spec.copy.fn, spec.extra_state, value_in};
          call = true;
        }
      }
      step[n_steps++] = CopyStep{k, word, key, slot, repr, call};
      all_c = all_c && repr == Binding::C && (!call || k->spec.lang == Binding::C);
    }
    // (Resized down: no element is written, no storage freed.)
    step_list.resize(n_steps);
    call_list.resize(n_calls);
    plain_plan = all_c && n_steps == t->count && t->dead == 0;
    if (keep_plan) {
      old->copy_plan_ok = true;
      old->copy_plan_plain = plain_plan;
    }
  }
  const CopyStep* const step = step_list.data();
  const CopyCall* const call_at = call_list.data();
  const std::size_t n_steps = step_list.size(), n_calls = call_list.size();
  // 2. The copy callbacks, one after another with the lock released, up to the first that fails.
  // Nothing of the dup happens between two of them: the new object is off limits to them (its
  // handle is the dup's answer), and the old one is held. (One run of the invoker instead of a
  // call, a frame, and the lock taken and released per callback: MPICH emulate [user], 64
  // attributes, with the free's run (delete_each) 42.6k -> 40.0k a dup + free, callgrind.)
  std::vector<CopyOutcome> outcomes = outcome_pool_.take_sized(n_calls);
  std::size_t ran = 0;
  bool as_given = true;  // (no callback: every attribute copied as it is)
  if (n_calls) {
    FrameGuard frame(this, old_slot);  // (only the callbacks run engine calls on this thread meanwhile)
    lk.unlock();
    ran = run_copies(call_at, n_calls, outcomes.data(), &as_given);
    lk.lock();
  }
  // 3a. The usual outcome: every attribute a C value the dup copies, and every callback succeeded
  // and gave back the value it was given (as MPI_COMM_DUP_FN does). The copy's records are then
  // the old ones, with the dup as where they were set: each goes into the same slot of a clean
  // table of the old one's size, keeping its set order (only the orders' relative order counts:
  // the copy's next order is the old object's), and the copy's list is the old one's. (Against
  // the general placing below, which reads each outcome with its step and counts the orders:
  // MPICH emulate dup + free [user], 64 attributes, 25.9k -> 24.5k, callgrind.) The invoker says
  // whether every callback did so (CallbackInvoker::copy_run's as_given: C callbacks only here,
  // the plan says so), as it checks each outcome. (A pass over the outcomes here cost ~16
  // instructions an attribute, MPICH emulate dup + free [user], callgrind.)
  if (plain_plan && ran == n_calls && as_given && n_steps) {
    AttrTable* ct = take_table(32 - t->shift);
    place_as_is(step, n_steps, t, ct, origin);  // (C: no cell; the key and value the plan's)
    fresh->set_order.assign(order.begin(), order.end());
    fresh->next_order = old->next_order;
    // Its free's plan is the old object's (the same records in the same slots, keyvals and
    // values), made once for the old one. (Not from a callback of a dup or free of the old
    // object, which may be walking its plan: the copy then walks its own list.)
    if (keep_plan) {
      if (!old->del_plan_ok) make_delete_plan(old);
      fresh->del_plan.assign(old->del_plan.begin(), old->del_plan.end());
      fresh->del_plan_ok = true;
    }
    outcome_pool_.give(std::move(outcomes));
    if (!keep_plan) {
      step_pool_.give(std::move(steps));
      call_pool_.give(std::move(calls));
    }
    {
      WriteSection ws(seq_);
      fresh->table.store(ct, std::memory_order_release);
    }
    fresh->set_order_ok = true;
    old->mutating = old_holder;
    fresh->mutating = nullptr;
    return {};
  }
  // 3. The copies, in set order, up to the first failure. Each goes into the same slot of a clean
  // table of the old one's size, as dup_plain's do: no probing, and where every attribute is
  // copied the records sit as in the old table, where lookups find them (else they are repacked).
  // The table is the new object's once they are in, under one write section. (Against a probe and
  // a write section per copy: MPICH emulate [user], 64 attributes, 40.0k -> 38.1k a dup + free,
  // callgrind.)
  // The copy's set order is the order its copies go in: its list is kept for its free.
  // (The list written in place, sized once, and each C value stored with the copy's next order
  // counted here, as store_value would store it: ~10 instructions an attribute less than a
  // push_back and store_value each: MPICH emulate dup + free [user], 32.6k -> 31.7k, callgrind.)
  AttrTable* ct = n_steps ? take_table(32 - t->shift) : nullptr;
  std::vector<std::uint32_t>& fresh_order = fresh->set_order;
  if (fresh_order.size() < n_steps) fresh_order.resize(n_steps);
  std::uint32_t* const order_out = fresh_order.data();
  std::uint32_t placed = 0;
  std::uint32_t next_order = fresh->next_order;  // (1: a new object; no renumbering ever needed)
  Result failure;
  std::size_t c = 0;
  for (std::size_t i = 0; i < n_steps; ++i) {
    const CopyStep& s = step[i];
    Binding repr = s.repr;
    std::uint64_t word = s.word;
    if (s.call) {
      if (__builtin_expect(c == ran, 0)) {  // (an invoker that stopped without a failure)
        failure = {Status::CallbackThrew, 0};
        break;
      }
      const CopyOutcome& r = outcomes[c];
      const Binding lang = call_at[c].lang;
      ++c;
      if (__builtin_expect(r.threw || r.rc != 0, 0)) {
        failure = r.threw ? Result{Status::CallbackThrew, 0} : Result{Status::CallbackFailed, r.rc};
        break;
      }
      if (r.flag == 0) continue;
      repr = lang;
      word = normalise(lang, r.value);
    }
    AttrRec& dst = ct->recs[s.slot];
    const std::uint32_t predefined = s.keyval ? 0u : kMetaPredefined;
    if (__builtin_expect(repr == Binding::C, 1)) {
      dst.key.store(s.key, std::memory_order_relaxed);
      dst.meta.store(static_cast<std::uint32_t>(Binding::C) | predefined, std::memory_order_relaxed);
      dst.value.store(word, std::memory_order_relaxed);
      dst.set_at = origin;
      dst.order = next_order++;
    } else {
      fresh->next_order = next_order;
      const bool filled = fill(fresh, &dst, s.key, repr, word, predefined != 0, origin);
      next_order = fresh->next_order;
      if (!filled) {
        failure = {Status::CapacityExhausted, 0};  // (out of value cells)
        break;
      }
    }
    ++ct->count;
    order_out[placed++] = s.slot;
    if (s.keyval) ++s.keyval->attributes;
  }
  fresh->next_order = next_order;
  fresh_order.resize(placed);
  if (!keep_plan) {
    step_pool_.give(std::move(steps));
    call_pool_.give(std::move(calls));
  }
  outcome_pool_.give(std::move(outcomes));
  // (Dead records of a table a free holds, when the dup runs from one of its callbacks, are holes
  // too: EngineFree.ACallbackSeesTheAttributesNotYetDeleted fails without the test of dead.)
  const bool holes = ct && (ct->count != t->count || t->dead != 0);
  if (ct) {
    if (holes) ct = repack(ct);
    WriteSection ws(seq_);
    fresh->table.store(ct, std::memory_order_release);
  }
  // (After the last copy: each store_value dropped the list.)
  fresh->set_order_ok = !holes && failure.ok();
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
  return failure;
}

std::size_t Engine::Impl::run_copies(const CopyCall* calls, std::size_t n, CopyOutcome* out, bool* as_given) {
  *as_given = false;
  if (!config.observer) {
    try {
      return config.invoker->copy_run(calls, n, out, as_given);
    } catch (...) {
      *as_given = false;
      return 0;  // (an invoker's own failure: the dup fails as if a callback threw)
    }
  }
  std::size_t i = 0;
  bool same = true;
  while (i < n) {
    std::size_t one = 0;
    bool one_as_given = false;
    try {
      one = config.invoker->copy_run(calls + i, 1, out + i, &one_as_given);
    } catch (...) {
    }
    if (one != 1) break;
    same = same && one_as_given;
    const CopyOutcome& o = out[i];
    notify(CallbackEvent{CallbackEvent::Which::Copy, CallbackCause::Dup, calls[i].kind, calls[i].old_object, calls[i].keyval,
                         o.rc, o.flag, o.threw});
    ++i;
    if (o.threw || o.rc != 0) break;
  }
  *as_given = same && i == n;
  return i;
}

void Engine::Impl::make_delete_plan(ObjectSlot* o) {
  const AttrTable* const t = o->table.load(std::memory_order_relaxed);
  const std::vector<std::uint32_t>& order = o->set_order;
  o->del_plan.resize(order.size());
  DeleteStep* const plan = o->del_plan.data();
  for (std::size_t j = 0; j < order.size(); ++j) {
    const AttrRec& rec = t->recs[order[j]];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    KeyvalSlot* const k = predefined_rec(rec) ? nullptr : held_keyval(key);
    DeleteStep& d = plan[j];
    d = DeleteStep{};
    d.keyval = k;
    d.slot = order[j];
    d.user = k && k->spec.del.action == DeleteAction::User;
    DeleteCall& c = d.call;
    c.kind = o->kind;
    c.object = o->handle;
    c.cause = CallbackCause::Free;
    c.keyval = key;
    c.repr = repr_of(rec);
    if (d.user) {
      const KeyvalSpec& spec = k->spec;
      const std::uint64_t word = rec.value.load(std::memory_order_relaxed);
      c.fn = spec.del.fn;
      c.extra_state = spec.extra_state;
      c.lang = spec.lang;
      c.value = c.repr == Binding::C && spec.lang == Binding::C ? word : callback_word(rec, k);
    }
  }
  o->del_plan_ok = true;
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
  const Result r = delete_each(lk, slot, o);
  if (!r.ok()) {
    o->mutating = nullptr;
    return r;
  }
  unregister_object(slot);  // (delete_each gave its table back)
  return {};
}

// The next attribute of a free's run with a delete callback to call: its call made in r->call
// (true), the ones before it without one marked deleted (lock held). False: none left.
// (Inline into free_step, and into delete_each for the first: one prologue a callback instead of
// two, ~12 instructions an attribute: MPICH emulate dup + free [user] 33.3k -> 32.6k, callgrind.)
[[gnu::always_inline]] inline bool Engine::Impl::free_next(FreeRun* r) {
  AttrTable* const t = r->t;
  if (const DeleteStep* const plan = r->plan) {
    // The kept plan: the call as made for the object, answered where it stands (against reading
    // the record, its keyval and its callback and writing the run's call: ~25 instructions an
    // attribute, MPICH emulate dup + free [user] 24.5k -> 23.1k with the plan's copy for the
    // dup's copy, callgrind).
    while (r->next != 0) {
      const DeleteStep& d = plan[--r->next];
      AttrRec* const rec = &t->recs[d.slot];
      if (d.user) {
        r->cur = &d.call;  // (its kind, object and cause not read)
        r->rec = rec;
        r->k = d.keyval;
        return true;
      }
      kill_attr(r->o, t, rec);
      if (KeyvalSlot* const k = d.keyval) {
        --k->attributes;
        unref_keyval(k);
      }
    }
    return false;
  }
  while (r->next != 0) {
    AttrRec* const rec = &t->recs[r->order[--r->next]];
    const KeyvalId key = rec->key.load(std::memory_order_relaxed);
    KeyvalSlot* const k = predefined_rec(*rec) ? nullptr : held_keyval(key);
    if (k && k->spec.del.action == DeleteAction::User) {
      const KeyvalSpec& spec = k->spec;
      const Binding repr = repr_of(*rec);
      std::uint64_t word = rec->value.load(std::memory_order_relaxed);
      if (repr != Binding::C || spec.lang != Binding::C) word = callback_word(*rec, k);
      DeleteCall& c = r->call;  // (kind, object and cause set once by delete_each)
      c.keyval = key;
      c.lang = spec.lang;
      c.fn = spec.del.fn;
      c.extra_state = spec.extra_state;
      c.value = word;
      c.repr = repr;
      r->cur = &c;
      r->rec = rec;
      r->k = k;
      return true;
    }
    kill_attr(r->o, t, rec);
    if (k) {
      --k->attributes;
      unref_keyval(k);
    }
  }
  return false;
}

// A free's deletes, newest first, stopping at the first failing callback (lock held, the object
// marked mutating by this thread). As delete_all, without a job (no pin: the attribute holds its
// keyval alive until it is deleted). The callbacks run in one run of the invoker (CallbackInvoker::
// del_run), which calls free_step between two of them: it takes the lock, marks the attribute
// whose callback returned deleted and finds the next one with a callback to call, marking those
// without one on the way, so each attribute is gone before the next callback runs, as before.
//
// The walk goes through the object's set order backwards, by index into its table: nothing moves
// a record of the table meanwhile. A deleted attribute is not erased (a backward-shift erase
// would move the records after it) but marked dead (kDeadKey: lookups find it absent and probe
// past it); every record is dead once the last callback returned, and the table is cleared
// through the list and given back at once. A free that stops at a failing callback keeps the
// attributes not deleted yet, repacked into a clean table. Nothing else changes the table while
// the free holds the object: other threads' modifying calls wait, this thread's callbacks' are
// refused, finalize deletes only predefined objects' attributes, and a dup of the object from a
// callback reads it, taking the dead records for holes. (Against a find per key of a
// newest-first key list, a record re-found when the engine moved during its callback and an
// erase by backward shift per attribute: MPICH emulate dup + free [user], 64 attributes, 36.5k
// -> 33.3k, callgrind.)
Result Engine::Impl::delete_each(Lock& lk, std::uint32_t slot, ObjectSlot* o) {
  AttrTable* const t = o->table.load(std::memory_order_relaxed);
  if (!t) return {};
  // The list is the free's until it is over (a dup from a callback makes the object's again).
  set_order_of(o);
  std::vector<std::uint32_t> order = std::move(o->set_order);
  o->set_order_ok = false;
  // (Its plan too, if it keeps one: the object's plan is made again from its list.)
  const bool with_plan = o->del_plan_ok;
  std::vector<DeleteStep> plan;
  if (with_plan) plan = std::move(o->del_plan);
  o->del_plan_ok = false;
  FreeRun run{};
  run.impl = this;
  run.o = o;
  run.t = t;
  run.order = order.data();
  run.plan = with_plan ? plan.data() : nullptr;
  run.quick = with_plan && !config.observer && !mu_.enabled();
  run.next = order.size();
  run.call.kind = o->kind;
  run.call.object = o->handle;
  run.call.cause = CallbackCause::Free;
  if (free_next(&run)) {
    FrameGuard frame(this, slot);  // (only the callbacks run engine calls on this thread meanwhile)
    lk.unlock();
    try {
      // (The first call whole: a plan's carries the object it was made for.)
      if (run.cur != &run.call) {
        const DeleteCall& c = *run.cur;
        run.call.keyval = c.keyval;
        run.call.lang = c.lang;
        run.call.fn = c.fn;
        run.call.extra_state = c.extra_state;
        run.call.value = c.value;
        run.call.repr = c.repr;
      }
      config.invoker->del_run(&run.call, &free_step, &run);
    } catch (...) {
      run.result = {Status::CallbackThrew, 0};  // (an invoker's own failure; free_step left the lock free)
    }
    lk.lock();
  }
  if (__builtin_expect(run.result.ok() && t->count != 0, 0))  // (an invoker that stopped its run early)
    run.result = {Status::CallbackThrew, 0};
  if (__builtin_expect(run.result.ok(), 1)) {
    // Every record is dead: the table is cleared through the list and goes back to the pool
    // (unregister_object would look at each of its slots).
    // (The records' address read once: each store of a key could alias t->recs otherwise, and it
    // was read again for each, ~4 instructions an attribute, MPICH emulate dup + free, callgrind.)
    WriteSection ws(seq_);
    o->table.store(nullptr, std::memory_order_relaxed);
    AttrRec* const recs = t->recs.get();
    for (const std::uint32_t i : order) recs[i].clear();
    t->dead = 0;
    table_pool_[32 - t->shift].push_back(t);
  } else if (t->dead != 0) {
    WriteSection ws(seq_);
    o->table.store(repack(t), std::memory_order_release);
    o->records_changed();
  }
  o->set_order = std::move(order);  // (its storage, for the object's next list; not valid)
  if (with_plan) o->del_plan = std::move(plan);  // (the same)
  return run.result;
}


// Between two callbacks of a free's run (the lock free; takes it and leaves it free): the
// attribute whose callback returned is marked deleted unless it failed, then the next one is
// found. (Its record is where it was found: nothing moves records while the free holds them.)
//
// The usual step first, in a function that needs no frame: a run through the object's kept plan
// with no observer and the lock switched off (below MPI_THREAD_MULTIPLE; FreeRun::quick), the
// callback succeeded, its keyval not freed by the user (so that its count going down destroys
// nothing), and the next attribute in the plan has a delete function to call. It decides all that
// before it changes anything, then does what free_step_general does in that case: the dead mark
// under a write section (the version moves, as kill_attr's), the keyval's count, the next call
// answered from the plan. Anything else goes to free_step_general from the start (a tail call).
// (free_step_general saves six callee-saved registers and keeps a frame for its calls (the
// observer, the lock's wait, unref_keyval, a cell's release): the quick step is ~44 instructions a
// callback where it was ~77, MPICH emulate dup + free [user] 23.1k -> 21.2k, callgrind.)
const DeleteCall* Engine::Impl::free_step(void* ctx, int rc, bool threw) {
  FreeRun* const r = static_cast<FreeRun*>(ctx);
  const std::size_t next = r->next;
  if (__builtin_expect(r->quick && next != 0 && (rc | static_cast<int>(threw)) == 0, 1)) {
    // The call that returned is the plan's at `next` (free_next leaves it there); its record and
    // keyval are read from the plan, not kept in the run (free_step_general reads them again).
    const DeleteStep* const plan = r->plan;
    const DeleteStep& d = plan[next - 1];
    KeyvalSlot* const k = plan[next].keyval;
    // (A kept plan's records are C values: no cell to give back. make_delete_plan is only made
    // for a plan whose every attribute is one: dup_object's plain_plan.)
    if (__builtin_expect(d.user && k->state.load(std::memory_order_relaxed) != kKeyFreed, 1)) {
      AttrTable* const t = r->t;
      std::atomic<std::uint64_t>& seq = r->impl->seq_;
      // (A write section without an object: its writers serialized and none open around it, the
      // counter ends two past where it was.)
      const std::uint64_t s = WriteSection::open(seq);
      mark_dead(r->o, t, &t->recs[plan[next].slot]);
      WriteSection::close(seq, s);
      --k->attributes;
      r->next = next - 1;
      return &d.call;  // (its kind, object and cause not read)
    }
  }
  return free_step_general(ctx, rc, threw);
}

const DeleteCall* Engine::Impl::free_step_general(void* ctx, int rc, bool threw) {
  FreeRun* const r = static_cast<FreeRun*>(ctx);
  Impl* const e = r->impl;
  if (r->quick) {  // (the call that returned: the plan's at r->next, as free_step reads it)
    const DeleteStep& d = r->plan[r->next];
    r->cur = &d.call;
    r->rec = &r->t->recs[d.slot];
    r->k = d.keyval;
  }
  if (e->config.observer)  // (the event is not even built without one)
    e->notify(CallbackEvent{CallbackEvent::Which::Delete, CallbackCause::Free, r->call.kind, r->call.object, r->cur->keyval,
                            rc, 0, threw});
  if (__builtin_expect(threw || rc != 0, 0)) {
    r->result = threw ? Result{Status::CallbackThrew, 0} : Result{Status::CallbackFailed, rc};
    return nullptr;
  }
  e->mu_.lock();
  e->kill_attr(r->o, r->t, r->rec);
  --r->k->attributes;
  e->unref_keyval(r->k);
  const bool more = e->free_next(r);
  e->mu_.unlock();
  return more ? r->cur : nullptr;
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

// Engine::hold_object: marks the object as `holder`'s, held for it.
bool Engine::Impl::hold_object(ObjectKind kind, Handle h, const void* holder) {
  Lock lk(mu_);
  std::uint32_t slot;
  if (find_object(kind, h, &slot) != Status::Ok) return false;
  ObjectSlot* o = objects_.get(slot);
  if (o->mutating) return false;
  o->mutating = holder;
  o->held = true;
  return true;
}

void Engine::Impl::release_hold(ObjectKind kind, Handle h) {
  Lock lk(mu_);
  std::uint32_t slot;
  if (find_object(kind, h, &slot) != Status::Ok) return;
  ObjectSlot* o = objects_.get(slot);
  if (held_here(o)) take_hold(o);
}

// Releases the keyval references of every attribute of an object about to be unregistered.
void Engine::Impl::drop_attribute_refs(const ObjectSlot* o) {
  const AttrTable* t = o->table.load(std::memory_order_relaxed);
  if (!t) return;
  for (std::uint32_t i = 0; i <= t->mask; ++i) {
    const AttrRec& rec = t->recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (!live_key(key) || predefined_rec(rec)) continue;
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
const void* Engine::thread_token() noexcept { return this_thread_token(); }
bool Engine::hold_object(ObjectKind kind, Handle handle, const void* holder) {
  return impl_->hold_object(kind, handle, holder);
}
void Engine::release_hold(ObjectKind kind, Handle handle) { impl_->release_hold(kind, handle); }
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
