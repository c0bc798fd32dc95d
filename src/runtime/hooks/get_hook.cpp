// The get hook (MPI_Comm_get_attr and its kin): a get the inline path could not answer, and the
// shadow cross-check of a get's answer with the model's, which the inline path calls too.
#include <cstring>

#include "runtime/hooks/hook_common.hpp"
#include "runtime/hooks/window_base.hpp"
#include "runtime/callbacks/kept_values.hpp"

namespace attrcheck::rt {

int get_diverged(const Api* api, const void* caller, const QueryCache::Entry* q, int rc, const void* value_out,
                 const int* flag) noexcept {
  return compare_with_model(Call{api, caller}, q->object, q->key(), q->engine_key, rc, value_out, flag, q->flag,
                            q->word);
}

int compare_with_model(const Call& call, Handle h, int key, int engine_key, int rc, const void* value_out,
                       const int* flag, int model_flag, std::uint64_t model_word) noexcept {
  if (rc != MPI_SUCCESS) {
    result_divergence(call, rc, Result{}, key);
    return rc;
  }
  if (same_answer(call.api->binding, value_out, *flag, model_flag, model_word)) return rc;
  if (*flag && model_flag && call.api->binding == Binding::C && same_fortran_value(call.api->kind, h, engine_key, value_out))
    return rc;
  char d[160];
  Appender a{d, sizeof d};
  a.put(*flag ? "returned flag 1" : "returned flag 0");
  a.put(model_flag ? " where the attribute is set" : " where no attribute is set");
  if (*flag && model_flag) a.put(", with a different value");
  // A value the library kept where a replacing set should have deleted it (MPICH), which
  // deleting the attribute left in place: the known divergence, not a new one.
  if (*flag && call.api->binding == Binding::C && call.api->kind != ObjectKind::Comm) {
    std::uint64_t answered = 0;
    std::memcpy(&answered, value_out, sizeof(void*));
    if (kept_value_answer(call, call.api->kind, h, engine_key, answered)) return rc;
  }
  divergence(call, d, true, key);
  return rc;
}

// A get the inline path (runtime/fast_path.hpp) could not answer: queries not yet found valid on
// this thread (unknown objects, refusals), truncation, predefined keys. A valid query is
// remembered, so the next get of it takes the inline path.
int on_get_attr(const Call& call, Handle h, int key, void* value_out, int* flag, const FnRef<int()>& forward) {
  // No CallScope: a get runs no callback that would need to name it.
  int rc;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward() : rc;
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  if (unchecked(kind, &h, &key)) return forward();
  const Binding as = call.api->binding;
  const std::uint64_t layout = layout_stamp();
  const std::uint64_t version = g_fast.version->load(std::memory_order_acquire);
  const int engine_key = to_engine_key(key);
  std::uint64_t model = 0;  // the value as the caller reads it (the first value_size bytes)
  int model_flag = 0;
  bool truncated = false;
  t_state.ctx.adopted.set = false;
  const Result res = with_object(call, kind, h, [&] {
    return r.engine->get_attr(kind, h, engine_key, as, &model, &model_flag, &truncated);
  });
  if (!res.ok()) return refuse(call, res, kind, h, key, engine_key);
  if (is_predefined_key(key)) {  // the library supplies predefined values
    rc = forward();
    // (A window's base, as its constructor returned it: the standard's answer.)
    if (rc == MPI_SUCCESS && kind == ObjectKind::Win && key == MPI_WIN_BASE && as == Binding::C)
      check_window_base(call, h, value_out, flag);
    return rc;
  }
  // (A get that depends on what the object's constructor copied is not cached: each site is seen.)
  const bool constructed = g_constructed_copies.load(std::memory_order_acquire) &&
                           note_constructed_get(call, kind, h, engine_key, key, model_flag != 0);
  if (truncated) {
    FindingInput in = finding(Rule::AttrTruncated, call);
    in.has_keyval = true;
    in.keyval = key;
    report(in);
  } else if (!constructed) {
    if (QueryCache::Entry* q = remember_query(kind, as, h, key, engine_key, layout))
      QueryCache::remember_answer(*q, version, model, model_flag);
  }
  if (r.mode == Mode::Emulate) return answer(as, model_flag, model, value_out, flag);
  rc = forward();
  if (refused_unknown(call, kind, h, rc)) return rc;  // an object the tool never saw, refused by the library
  return compare_with_model(call, h, key, engine_key, rc, value_out, flag, model_flag, model);
}

}  // namespace attrcheck::rt
