// The engine at MPI_Finalize (delete callbacks on MPI_COMM_SELF, then MPI_COMM_WORLD) and its
// introspection of attributes.
#include <algorithm>
#include <vector>

#include "engine_impl.hpp"

namespace attrcheck {

FinalizeReport Engine::Impl::finalize(const FinalizeOptions& options) {
  FinalizeReport report;
  Lock lk(mu_);
  if (finalized_.load(std::memory_order_relaxed)) return report;
  for (std::uint8_t flag : {std::uint8_t{kObjectSelf}, std::uint8_t{kObjectWorld}}) {
    if (flag == kObjectSelf && !options.self_step) continue;
    if (flag == kObjectWorld && options.after_self && options.self_step) {
      lk.unlock();
      options.after_self(options.context);
      lk.lock();
    }
    if (flag == kObjectWorld && !options.world_step) break;
    if (flag == kObjectWorld && !options.delete_world_attributes) continue;
    std::vector<std::uint32_t> slots;
    for (std::uint32_t i = 0; i < object_count_; ++i) {
      const ObjectSlot* o = objects_.get(i);
      if (o->live && (o->flags & flag)) slots.push_back(i);
    }
    for (std::uint32_t slot : slots) {
      ObjectSlot* o = objects_.get(slot);
      while (o->mutating && o->mutating != this_thread_token()) wait_turn(lk);
      if (!o->live) continue;
      const void* previous = o->mutating;
      o->mutating = this_thread_token();
      delete_all(lk, slot, CallbackCause::Finalize, false, &report.failures);
      o->mutating = previous;
    }
  }
  if (!options.world_step) return report;
  {
    WriteSection ws(seq_, &layout_);
    finalized_.store(true, std::memory_order_release);
  }
  return report;
}

void Engine::Impl::collect_attributes(const ObjectSlot& o, std::vector<AttributeInfo>* out) const {
  const AttrTable* t = o.table.load(std::memory_order_relaxed);
  if (!t) return;
  const std::size_t first = out->size();
  for (std::uint32_t i = 0; i <= t->mask; ++i) {
    const AttrRec& rec = t->recs[i];
    const KeyvalId key = rec.key.load(std::memory_order_relaxed);
    if (!live_key(key)) continue;  // (dead: deleted by a free in progress)
    AttributeInfo a{};
    a.kind = o.kind;
    a.object = o.handle;
    a.keyval = key;
    a.repr = repr_of(rec);
    a.value = rec.value.load(std::memory_order_relaxed);
    a.order = rec.order;
    a.predefined = predefined_rec(rec);
    a.set_at = rec.set_at;
    a.object_created_at = o.created_at;
    a.object_flags = o.flags;
    a.delete_action = DeleteAction::NullDelete;
    if (!a.predefined)
      if (const KeyvalSlot* k = slot_of(key)) a.delete_action = k->spec.del.action;
    out->push_back(a);
  }
  std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(),
            [](const AttributeInfo& x, const AttributeInfo& y) { return x.order < y.order; });
}

// Public interface.

FinalizeReport Engine::finalize(const FinalizeOptions& options) { return impl_->finalize(options); }
std::vector<AttributeInfo> Engine::attributes() const {
  Lock lk(impl_->mu_);
  std::vector<AttributeInfo> out;
  for (std::uint32_t i = 0; i < impl_->object_count_; ++i) {
    const ObjectSlot* o = impl_->objects_.find(i);
    if (o && o->live) impl_->collect_attributes(*o, &out);
  }
  return out;
}
std::vector<AttributeInfo> Engine::attributes(ObjectKind kind, Handle handle) const {
  Lock lk(impl_->mu_);
  std::vector<AttributeInfo> out;
  std::uint32_t slot;
  if (impl_->find_object(kind, handle, &slot) == Status::Ok)
    impl_->collect_attributes(*impl_->objects_.find(slot), &out);
  return out;
}
const std::atomic<bool>* Engine::fortran_values_flag() const noexcept { return &impl_->fortran_values_; }

std::size_t Engine::attribute_bytes() const {
  Lock lk(impl_->mu_);
  std::size_t bytes = impl_->cells_in_use_ * sizeof(Cell);
  for (std::uint32_t i = 0; i < impl_->object_count_; ++i) {
    const ObjectSlot* o = impl_->objects_.find(i);
    if (!o || !o->live) continue;
    if (const AttrTable* t = o->table.load(std::memory_order_relaxed))
      bytes += sizeof(AttrTable) + std::size_t{t->capacity()} * sizeof(AttrRec);
  }
  return bytes;
}

}  // namespace attrcheck
