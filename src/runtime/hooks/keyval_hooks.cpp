// The keyval hooks: create (the checks, the predefined callbacks recognised, in shadow mode the
// library given trampolines for user callbacks, or a held key handed out again) and free (in
// shadow mode the library's free held back: keyvals.cpp). The checks they share with the other
// hooks are in hook_common.hpp.
#include <utility>

#include "runtime/callbacks/trampolines.hpp"
#include "runtime/hooks/hook_common.hpp"
#include "runtime/process/chain.hpp"
#include "runtime/profile/mpi_profile.hpp"

namespace attrcheck::rt {

int on_create_keyval(const Call& call, void* copy_fn, void* delete_fn, int* keyval, std::uint64_t extra_state,
                     const FnRef<int(void*, void*, std::uint64_t)>& forward) {
  CallScope scope(call);
  int rc;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward(copy_fn, delete_fn, extra_state) : rc;
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  for (const auto& [fn, param] : {std::pair<void*, const char*>{copy_fn, "copy_fn"}, {delete_fn, "delete_fn"}}) {
    if (fn || null_callback_is_predefined(call.api->binding)) continue;  // MPICH: NULL is MPI_*_NULL_*_FN
    FindingInput in = finding(Rule::ArgNull, call);
    in.detail = param;
    report(in);
    return fail(call, kind, 0, MPI_ERR_ARG);
  }
  KeyvalSpec spec;
  spec.kind = kind;
  spec.extra_state = extra_state;
  spec.lang = call.api->binding;
  spec.mpi1 = call.api->replacement != nullptr;
  spec.copy = {CopyAction::User, copy_fn, false};
  spec.del = {DeleteAction::User, delete_fn, false};
  for (const bool copy : {true, false}) {
    const PredefinedFn* p = find_predefined_fn(copy ? copy_fn : delete_fn, copy, kind, call.api->binding);
    if (!p) continue;
    if (copy) spec.copy = {static_cast<CopyAction>(p->action), nullptr, p->deprecated != nullptr};
    else spec.del = {static_cast<DeleteAction>(p->action), nullptr, p->deprecated != nullptr};
    if (p->deprecated) {
      FindingInput in = finding(Rule::DeprecatedConstant, call);
      in.detail = p->name;
      in.replacement = p->deprecated;
      report(in);
    }
  }
  // Shadow: the library gets trampolines for user callbacks (so every run is observed), C ones
  // the record as extra_state (Fortran ones the user's: they find the record by keyval);
  // predefined callbacks go to it unchanged. A held library key that was given the same is
  // handed out again once its quarantine is over, without the library's create (keyvals.cpp).
  const Origin origin = origin_here(call);
  LibraryArgs lib;  // (left unset in emulate mode)
  int engine_id = 0, held_key = 0;
  bool reused = false;
  if (r.mode == Mode::Shadow) {
    const bool user_copy = spec.copy.action == CopyAction::User, user_delete = spec.del.action == DeleteAction::User;
    lib = {call.api, user_copy ? trampoline_copy(kind, spec.lang) : copy_fn,
           user_delete ? trampoline_delete(kind, spec.lang) : delete_fn,
           (user_copy || user_delete) && spec.lang == Binding::C, extra_state};
    // (Not with a tool after attrcheck: it sees each create and free the program makes.)
    reused = !g_chained && reuse_held_keyval(lib, spec, origin, &held_key, &engine_id);
  }
  const Result res = reused ? Result{} : r.engine->create_keyval(spec, &engine_id, origin);
  if (res.status == Status::CapacityExhausted) {
    // No capacity may change what the program does: the library makes and serves it, unchecked.
    note_limit("keyvals", "attrcheck's keyval table is full (2,097,151 live keyvals): keyvals created from now on "
                          "go to the MPI library unchecked");
    rc = forward(copy_fn, delete_fn, extra_state);
    if (rc == MPI_SUCCESS) add_unchecked_key(*keyval);
    return rc;
  }
  if (!res.ok()) return r.mode == Mode::Shadow ? forward(copy_fn, delete_fn, extra_state) : MPI_ERR_OTHER;
  KeyRecord* rec = new_record(engine_id);
  rec->kind = kind;
  rec->copy_fn = spec.copy.action == CopyAction::User ? copy_fn : nullptr;
  rec->delete_fn = spec.del.action == DeleteAction::User ? delete_fn : nullptr;
  rec->extra_state = extra_state;
  rec->lang = spec.lang;
  rec->unseen_copy.store(spec.copy.action == CopyAction::Dup && spec.del.action == DeleteAction::User,
                         std::memory_order_relaxed);
  if (r.mode == Mode::Emulate) {
    rec->user_id = engine_id;
    rec->engine_id.store(engine_id, std::memory_order_release);
    *keyval = engine_id;
    return MPI_SUCCESS;
  }
  rec->library = lib;
  // The record is published (engine_id) only once user_id is the library's key: from then on
  // other threads that find the keyval among the engine's live ones (a constructor on another
  // thread asks the library whether its new object carries it) pass user_id to the library, and
  // an engine id there is an invalid keyval to it (MPICH aborts). Until then record_for() finds
  // no record and they skip the keyval, which no attribute can use yet. The library's create runs
  // no callback, so nothing needs the record meanwhile.
  if (reused) {
    *keyval = held_key;  // the library made it with `lib`, this very record included
  } else {
    rc = forward(lib.copy_fn, lib.delete_fn, lib.own_record ? reinterpret_cast<std::uintptr_t>(rec) : extra_state);
    if (rc != MPI_SUCCESS) {
      int undo = engine_id;
      r.engine->free_keyval(kind, &undo);
      return rc;
    }
  }
  rec->user_id = *keyval;
  rec->engine_id.store(engine_id, std::memory_order_release);
  map_key(*keyval, engine_id);
  return MPI_SUCCESS;
}

int on_free_keyval(const Call& call, int* keyval, const FnRef<int()>& forward) {
  CallScope scope(call);
  int rc;
  if (!enter(call, &rc)) return rc == kPassThrough ? forward() : rc;
  Runtime& r = state();
  const ObjectKind kind = call.api->kind;
  const int user_key = *keyval;
  if (unchecked(kind, nullptr, &user_key)) return forward();
  int engine_key = to_engine_key(user_key);
  const int engine_id = engine_key;
  // Shadow: the engine keeps the slot, whose record the library's key names (keyvals.cpp).
  const Result res = r.engine->free_keyval(kind, &engine_key, origin_here(call), r.mode == Mode::Shadow);
  if (!res.ok()) return refuse(call, res, kind, 0, user_key, to_engine_key(user_key));
  *keyval = MPI_KEYVAL_INVALID;
  if (r.mode == Mode::Shadow) {
    // The library's free is held back (keyvals.cpp), so that it does not hand the number out again
    // while stale copies of it may still be around. (forward stays unused: it would free it now.)
    (void)forward;
    quarantine_keyval(kind, user_key, engine_id);
  }
  return MPI_SUCCESS;
}

}  // namespace attrcheck::rt
