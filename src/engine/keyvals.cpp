// The engine's keyval operations: create, free, register a predefined one, and what is known of each.
#include <algorithm>
#include <vector>

#include "engine_impl.hpp"

namespace attrcheck {

// A new keyval `id` in slot `k` (lock held). Inlined into both callers: out of line it costs
// create_keyval ~15 instructions (callgrind).
[[gnu::always_inline]] inline void Engine::Impl::start_keyval(KeyvalSlot* k, KeyvalId id, const KeyvalSpec& spec, Origin origin) {
  {
    WriteSection ws(seq_, &layout_);
    k->kind.store(static_cast<std::uint8_t>(spec.kind), std::memory_order_relaxed);
    k->state.store(kKeyAlive, std::memory_order_relaxed);
    k->id.store(id, std::memory_order_relaxed);
  }
  k->attributes = 0;
  k->pins = 0;
  k->spec = spec;
  k->created_at = origin;
  k->freed_at = 0;
}

// Whether a create (or renew) may go ahead: Finalized, NullArgument or Ok (lock held).
[[gnu::always_inline]] inline Status Engine::Impl::admit_keyval(const KeyvalSpec& spec, const KeyvalId* out) const {
  if (finalized_.load(std::memory_order_relaxed)) return Status::Finalized;
  if (!out || (spec.copy.action == CopyAction::User && !spec.copy.fn) ||
      (spec.del.action == DeleteAction::User && !spec.del.fn))
    return Status::NullArgument;
  return Status::Ok;
}

// An id no keyval may have: MPI_KEYVAL_INVALID's value or a predefined keyval's (lock held).
[[gnu::always_inline]] inline bool Engine::Impl::reserved_keyval_id(KeyvalId id) const {
  return id == config.keyval_invalid || (id >= predefined_lo_ && id <= predefined_hi_ && find_predefined(id));
}

Result Engine::Impl::create_keyval(const KeyvalSpec& spec, KeyvalId* out, Origin origin) {
  Lock lk(mu_);
  if (const Status s = admit_keyval(spec, out); s != Status::Ok) return {s, 0};
  const std::uint32_t last_slot = keyval_capacity();
  for (;;) {
    std::uint32_t slot;
    if (destroyed_slots_.size() > kReuseAfter ||
        (keyval_slots_used_ > last_slot && !destroyed_slots_.empty())) {
      slot = destroyed_slots_.front();
      destroyed_slots_.pop_front();
    } else if (keyval_slots_used_ <= last_slot) {
      slot = keyval_slots_used_++;
    } else {
      return {Status::CapacityExhausted, 0};
    }
    KeyvalSlot* k = keyvals_.get(slot);
    if (k->generation >= kMaxGeneration) continue;  // retired for good
    const std::uint32_t gen = ++k->generation;
    const auto id = static_cast<KeyvalId>((gen << kSlotBits) | slot);
    if (reserved_keyval_id(id)) {
      // Never hand out a reserved id: skip this generation (the slot keeps its previous id and
      // state) and put the slot back for later.
      destroyed_slots_.push_back(slot);
      continue;
    }
    start_keyval(k, id, spec, origin);
    *out = id;
    return {};
  }
}

Result Engine::Impl::renew_keyval(KeyvalId old_id, const KeyvalSpec& spec, KeyvalId* out, Origin origin) {
  Lock lk(mu_);
  if (const Status s = admit_keyval(spec, out); s != Status::Ok) return {s, 0};
  KeyvalSlot* k = slot_of(old_id);
  if (!k || !k->kept || k->id.load(std::memory_order_relaxed) != old_id) return {Status::KeyvalUnknown, 0};
  if (k->state.load(std::memory_order_relaxed) != kKeyDestroyed) return {Status::KeyvalFreed, 0};
  const std::uint32_t slot = static_cast<std::uint32_t>(old_id) & kSlotMask;
  for (;;) {
    if (k->generation >= kMaxGeneration) return {Status::CapacityExhausted, 0};  // left to release_keyval_slot
    const std::uint32_t gen = ++k->generation;
    const auto id = static_cast<KeyvalId>((gen << kSlotBits) | slot);
    // A reserved id's generation is skipped, as in create_keyval (the slot keeps its state).
    if (reserved_keyval_id(id)) continue;
    k->kept = false;
    --kept_slots_;
    start_keyval(k, id, spec, origin);
    *out = id;
    return {};
  }
}

void Engine::Impl::release_keyval_slot(KeyvalId old_id) {
  Lock lk(mu_);
  KeyvalSlot* k = slot_of(old_id);
  if (!k || !k->kept || k->id.load(std::memory_order_relaxed) != old_id) return;
  k->kept = false;
  --kept_slots_;
  if (k->state.load(std::memory_order_relaxed) == kKeyDestroyed)  // else unref_keyval queues it when it is
    destroyed_slots_.push_back(static_cast<std::uint32_t>(old_id) & kSlotMask);
}

Result Engine::Impl::free_keyval(ObjectKind kind, KeyvalId* keyval, Origin origin, bool keep_slot) {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
  if (!keyval) return {Status::NullArgument, 0};
  const KeyvalId id = *keyval;
  if (id == config.keyval_invalid) return {Status::KeyvalInvalid, 0};
  KeyvalSlot* k = nullptr;
  const Status s = classify_keyval(id, &k);
  // A live engine keyval is never a predefined id (create_keyval skips them); an unknown or
  // older-generation one may be.
  if (s != Status::Ok && find_predefined(id)) return {Status::KeyvalPredefined, 0};
  if (s == Status::KeyvalUnknown) return {s, 0};
  if (s == Status::KeyvalFreed) return {Status::KeyvalDoubleFree, 0};
  if (k->spec.kind != kind) return {Status::KeyvalKindMismatch, 0};
  {
    WriteSection ws(seq_, &layout_);
    k->state.store(kKeyFreed, std::memory_order_relaxed);
  }
  k->freed_at = origin;
  // Kept slots are never more than a quarter of the capacity: the rest stays free for new keyvals
  // (a host that keeps a few thousand, at the default capacity of 2^21 - 1, is never refused).
  if (keep_slot && kept_slots_ < keyval_capacity() / 4) {
    k->kept = true;
    ++kept_slots_;
  }
  unref_keyval(k);
  *keyval = config.keyval_invalid;
  return {};
}

Result Engine::Impl::register_predefined(ObjectKind kind, KeyvalId id, const char* name, bool copy_on_dup) {
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return {Status::Finalized, 0};
  if (id == config.keyval_invalid || !live_key(id)) return {Status::KeyvalInvalid, 0};  // (ids tables reserve)
  KeyvalSlot* k = nullptr;
  if (find_predefined(id) || classify_keyval(id, &k) != Status::KeyvalUnknown)
    return {Status::KeyvalPredefined, 0};
  const std::uint32_t n = predefined_count_.load(std::memory_order_relaxed);
  if (n >= kMaxPredefined) return {Status::CapacityExhausted, 0};
  WriteSection ws(seq_, &layout_);
  PredefinedKeyval& p = predefined_[n];
  p.id.store(id, std::memory_order_relaxed);
  p.kind.store(static_cast<std::uint8_t>(kind), std::memory_order_relaxed);
  p.copy_on_dup = copy_on_dup;
  p.name = name ? name : "";
  predefined_lo_ = id < predefined_lo_ ? id : predefined_lo_;
  predefined_hi_ = id > predefined_hi_ ? id : predefined_hi_;
  predefined_count_.store(n + 1, std::memory_order_release);
  return {};
}

KeyvalInfo Engine::Impl::info_of(const KeyvalSlot& k) const {
  KeyvalInfo info;
  info.id = k.id.load(std::memory_order_relaxed);
  info.kind = k.spec.kind;
  const std::uint8_t state = k.state.load(std::memory_order_relaxed);
  info.user_freed = state == kKeyFreed || state == kKeyDestroyed;
  info.destroyed = state == kKeyDestroyed;
  info.attributes = k.attributes;
  info.spec = k.spec;
  info.created_at = k.created_at;
  info.freed_at = k.freed_at;
  return info;
}

bool Engine::Impl::keyval_info(KeyvalId id, KeyvalInfo* out) const {
  if (!out) return false;
  Lock lk(mu_);
  if (const PredefinedKeyval* p = find_predefined(id)) {
    *out = KeyvalInfo{};
    out->id = id;
    out->kind = static_cast<ObjectKind>(p->kind.load(std::memory_order_relaxed));
    out->predefined = true;
    out->spec.kind = out->kind;
    out->name = p->name;
    return true;
  }
  const KeyvalSlot* k = slot_of(id);
  if (!k || k->id.load(std::memory_order_relaxed) != id || k->state.load(std::memory_order_relaxed) == kKeyEmpty)
    return false;
  *out = info_of(*k);
  return true;
}

template <typename Pred>
std::vector<KeyvalInfo> Engine::Impl::keyvals_where(Pred pred) const {
  Lock lk(mu_);
  std::vector<KeyvalInfo> out;
  for (std::uint32_t i = 1; i < keyval_slots_used_; ++i) {
    const KeyvalSlot* k = keyvals_.find(i);
    if (!k) continue;
    const std::uint8_t state = k->state.load(std::memory_order_relaxed);
    if (state == kKeyEmpty || state == kKeyDestroyed) continue;
    if (pred(state)) out.push_back(info_of(*k));
  }
  return out;
}

// Public interface.

Result Engine::create_keyval(const KeyvalSpec& spec, KeyvalId* keyval, Origin origin) {
  return impl_->create_keyval(spec, keyval, origin);
}
Result Engine::free_keyval(ObjectKind kind, KeyvalId* keyval, Origin origin, bool keep_slot) {
  return impl_->free_keyval(kind, keyval, origin, keep_slot);
}
Result Engine::renew_keyval(KeyvalId old_id, const KeyvalSpec& spec, KeyvalId* keyval, Origin origin) {
  return impl_->renew_keyval(old_id, spec, keyval, origin);
}
void Engine::release_keyval_slot(KeyvalId old_id) { impl_->release_keyval_slot(old_id); }
Result Engine::register_predefined_keyval(ObjectKind kind, KeyvalId id, const char* name, bool copy_on_dup) {
  return impl_->register_predefined(kind, id, name, copy_on_dup);
}
bool Engine::keyval_info(KeyvalId id, KeyvalInfo* out) const { return impl_->keyval_info(id, out); }
std::vector<KeyvalInfo> Engine::live_keyvals() const {
  return impl_->keyvals_where([](std::uint8_t) { return true; });
}
std::vector<KeyvalInfo> Engine::leaked_keyvals() const {
  return impl_->keyvals_where([](std::uint8_t state) { return state == kKeyAlive; });
}
bool Engine::is_engine_keyval(KeyvalId id) const noexcept {
  Lock lk(impl_->mu_);
  KeyvalSlot* k = nullptr;
  return impl_->classify_keyval(id, &k) != Status::KeyvalUnknown;
}

}  // namespace attrcheck
