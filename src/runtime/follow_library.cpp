// Shadow mode: where the model follows what the library did after a call it ran differently from
// the standard (the difference itself is reported as impl.divergence), so that later calls are
// compared like with like instead of repeating the same difference at every use.
#include "runtime/runtime.hpp"

namespace attrcheck::rt {

void follow_failed_free(const Call& call, ObjectKind kind, Handle h) {
  Engine& e = *state().engine;
  for (const AttributeInfo& a : e.attributes(kind, h)) {
    if (a.predefined) continue;
    const KeyRecord* rec = record_for(a.keyval);
    if (!rec || library_attr(kind, h, rec->user_id, nullptr, rec->lang)) continue;
    // The library dropped it though the free failed (MPICH drops every attribute, and fails only
    // if the last delete callback it ran failed): drop it from the model without callbacks.
    {
      ReplayScope silent(call, /*lenient=*/true);  // no callback was run for it: none is replayed
      e.delete_attr(kind, h, a.keyval);
      silent.dismiss();
    }
    divergence(call, "dropped an attribute whose delete callback failed, though the free failed", true, rec->user_id,
               DivergenceSite::DroppedAttribute);
  }
}

}  // namespace attrcheck::rt
