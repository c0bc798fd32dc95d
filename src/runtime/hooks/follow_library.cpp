// Shadow mode: where the model follows what the library did after a call it ran differently from
// the standard (the difference itself is reported as impl.divergence), so that later calls are
// compared like with like instead of repeating the same difference at every use; and where the
// library's answer and the model's are alike though their words differ.
#include <cstring>

#include "runtime/hooks/hook_common.hpp"

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

bool same_fortran_value(ObjectKind kind, Handle h, int engine_key, const void* value_out) noexcept {
  void* library = nullptr;
  std::memcpy(&library, value_out, sizeof library);
  if (!library) return false;
  std::vector<AttributeInfo> attributes;
  try {
    attributes = state().engine->attributes(kind, h);
  } catch (...) {  // (out of memory: no verdict, the difference is reported)
    return false;
  }
  for (const AttributeInfo& a : attributes) {
    if (a.keyval != engine_key) continue;
    // The standard: a C read of a value set from Fortran gets a pointer to the stored MPI_Aint
    // (MPI_COMM_SET_ATTR) or int (MPI_ATTR_PUT); each side points at its own copy.
    if (a.repr == Binding::FortranAint) {
      MPI_Aint v;
      std::memcpy(&v, library, sizeof v);
      return static_cast<std::uint64_t>(v) == a.value;
    }
    if (a.repr == Binding::FortranInt) {
      Fint v;
      std::memcpy(&v, library, sizeof v);
      return static_cast<std::uint64_t>(static_cast<std::int64_t>(v)) == a.value;
    }
    return false;
  }
  return false;
}

}  // namespace attrcheck::rt
