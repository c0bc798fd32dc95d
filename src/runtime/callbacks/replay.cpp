// Shadow mode's replay (see replay.hpp): the engine's copy and delete callbacks answered from the
// runs the library made, and whatever the library ran that the model did not ask for reported.
#include "runtime/callbacks/replay.hpp"

#include "runtime/callbacks/kept_values.hpp"
#include "runtime/profile/mpi_profile.hpp"
#include "runtime/process/findings.hpp"
#include "runtime/process/keyvals.hpp"
#include "runtime/process/objects.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

namespace {

// The library passed a callback (`which`: "copy" or "delete") another value than the model holds.
void value_divergence(const Replay& r, const char* which, std::uint64_t passed, std::uint64_t model, int user_key) {
  char d[160];
  Appender a{d, sizeof d};
  a.put("passed ");
  a.hex(passed);
  a.put(" to a ");
  a.put(which);
  a.put(" callback where the attribute's value is ");
  a.hex(model);
  divergence(*r.call, d, true, user_key);
}

// The observations not known to be used yet. The library usually runs the callbacks of a dup or
// free in the order the model replays them, so the used ones form a prefix that the searches skip:
// without it each search went through all earlier observations.
Observation* unused_begin(Replay& r) noexcept { return r.seen.begin() + r.used_below; }

// Marks `o` used, advancing the used prefix past it.
void mark_used(Replay& r, Observation& o) noexcept {
  o.used = true;
  Observation* const first = r.seen.begin();
  while (r.used_below < r.seen.size() && first[r.used_below].used) ++r.used_below;
}

// The library's unused run of the copy (`copy`) or delete callback of `keyval` on `object`: the
// one passed `value` if there is one (`by_value`), else the first. Two runs for one attribute are
// a library holding two values under one keyval (a profile's KeptValue divergence): the one with
// the model's value is the model's, and the other is left for finish() to account for.
Observation* find_run(Replay& r, bool copy, Handle object, int keyval, std::uint64_t value, bool by_value) noexcept {
  Observation* first = nullptr;
  for (Observation* p = unused_begin(r); p != r.seen.end(); ++p) {
    Observation& o = *p;
    if (o.used || o.copy != copy || o.object != object || o.engine_id != keyval) continue;
    if (!by_value || o.value_in == value) return &o;
    if (!first) first = &o;
  }
  return first;
}

// Whether the model took another run of `o`'s callback for the same attribute (the same object
// and keyval, both copies or both deletes).
bool ran_again(const Replay& r, const Observation& o) noexcept {
  for (const Observation& x : r.seen)
    if (&x != &o && x.used && x.copy == o.copy && x.kind == o.kind && x.object == o.object && x.engine_id == o.engine_id)
      return true;
  return false;
}

}  // namespace

int replay_copy(Replay& r, const CopyCall& c, std::uint64_t* out, int* flag) {
  if (Observation* p = find_run(r, true, c.old_object, c.keyval, c.value_in, true)) {
    Observation& o = *p;
    mark_used(r, o);
    if (o.value_in != c.value_in)
      value_divergence(r, "copy", o.value_in, c.value_in, record_for(c.keyval) ? record_for(c.keyval)->user_id : c.keyval);
    *out = o.value_out;
    *flag = o.flag;
    return o.rc;
  }
  if (!r.lenient)
    divergence(*r.call, "did not run a copy callback the standard requires", true,
               record_for(c.keyval) ? record_for(c.keyval)->user_id : c.keyval, DivergenceSite::MissingCallback);
  *flag = 0;
  return MPI_SUCCESS;
}

namespace {

// Whether the library's run `o` may be the one on `object` of `kind`: it is on that object, or
// it is a Fortran callback's where the library is known to pass those a wrong handle (the
// profile's WrongHandle divergence), whose handle then says nothing about the object.
bool may_be_on(const Observation& o, ObjectKind kind, Handle object) noexcept {
  if (o.object == object) return true;
  if (fortran_delete_handles_trusted() || o.kind != kind) return false;
  const KeyRecord* rec = record_for(o.engine_id);
  return rec && rec->lang != Binding::C;
}

}  // namespace

// (Out of line: inlined, its frame was set up on every emulated delete callback too.)
[[gnu::noinline]] int replay_delete(Replay& r, const DeleteCall& c) {
  const KeyRecord* rec = record_for(c.keyval);
  const int user_key = rec ? rec->user_id : c.keyval;
  if (r.has_ordered_object && c.object == r.ordered_object) {
    for (const Observation* p = unused_begin(r); p != r.seen.end(); ++p) {
      const Observation& o = *p;
      if (o.used || o.copy || !may_be_on(o, c.kind, c.object)) continue;
      if (o.engine_id != c.keyval)
        divergence(*r.call, "ran MPI_COMM_SELF's delete callbacks out of the order they were set (newest first)",
                   true, user_key, DivergenceSite::SelfDeleteOrder);
      break;
    }
  }
  const bool comparable = c.lang == Binding::C && c.repr == Binding::C;
  if (Observation* p = find_run(r, false, c.object, c.keyval, c.value, comparable)) {
    Observation& o = *p;
    mark_used(r, o);
    if (comparable && o.value_in != c.value) value_divergence(r, "delete", o.value_in, c.value, user_key);
    return o.rc;
  }
  // A Fortran delete callback the library ran for this keyval, but passed another object's handle
  // (Open MPI 4.1.4 passes 0): the run is this one; the handle is a divergence of its own.
  if (rec && rec->lang != Binding::C) {
    for (Observation* p = unused_begin(r); p != r.seen.end(); ++p) {
      Observation& o = *p;
      if (o.used || o.copy || o.engine_id != c.keyval || o.kind != c.kind) continue;
      mark_used(r, o);
      char d[200];
      Appender a{d, sizeof d};
      // (No handle conversions here: this may run after the library's MPI_Finalize.)
      a.put("passed Fortran handle ");
      a.num(o.fortran_object);
      a.put(" to a Fortran delete callback for ");
      const char* name = object_name(c.kind, c.object);
      if (name) {
        a.put(name);
      } else {
        a.put(to_string(c.kind));
        a.put(" ");
        a.hex(c.object);
      }
      divergence(*r.call, d, true, user_key, DivergenceSite::WrongHandle);
      return o.rc;
    }
  }
  const bool optional = r.lenient || c.cause == CallbackCause::DupRollback ||
                        (c.cause == CallbackCause::Finalize && c.object != state().self);
  if (!optional) {
    kept_value_if_known(*r.call, c.kind, c.object, c.keyval, c.value);  // (kept_values.hpp)
    divergence(*r.call, "did not run a delete callback the standard requires", true, user_key,
               DivergenceSite::MissingCallback);
  }
  return MPI_SUCCESS;
}

void ReplayScope::unlog() {
  RunLog* const log = replay_.log;
  if (!log) return;
  replay_.log = nullptr;
  if (log->copies_of != RunLog::kNone) {
    for (const RanCopy& c : log->copies)
      replay_.seen.push_back(Observation{true, log->kind, log->copies_of, c.keyval, c.rc, c.value_in, c.flag, c.value_out, false, 0});
    log->copies.clear();
  } else {
    for (const RanDelete& d : log->deletes)
      replay_.seen.push_back(Observation{false, log->kind, d.object, d.keyval, d.rc, d.value, 0, 0, false, 0});
    log->deletes.clear();
  }
}

void ReplayScope::finish() {
  unlog();
  t_state.ctx.replay = replay_.outer;  // nothing more is collected
  if (replay_.lenient) return;
  for (const Observation& o : replay_.seen) {
    if (o.used) continue;
    // The library acting on a value it kept where a replacing set should have deleted it: the
    // known divergence, noted (kept_values.hpp).
    if (kept_value_run(*replay_.call, o, ran_again(replay_, o))) continue;
    // A delete callback for an object the model does not hold: an object the library made
    // internally, or a deletion it deferred past the free (reported there). Not a new finding;
    // where the profile lists it at this call (a window's internal communicator, at
    // MPI_Win_free), a note about the library.
    if (!o.copy && !live_object(o.kind, o.object)) {
      hidden_object_run(*replay_.call, o);
      continue;
    }
    char d[200];
    Appender a{d, sizeof d};
    a.put(o.copy ? "ran a copy callback" : "ran a delete callback");
    a.put(" on ");
    a.put(object_name(o.kind, o.object) ? object_name(o.kind, o.object) : to_string(o.kind));
    a.put(" that the standard does not call here");
    const KeyRecord* rec = record_for(o.engine_id);
    divergence(*replay_.call, d, true, rec ? rec->user_id : o.engine_id, DivergenceSite::ExtraCallback);
  }
}

}  // namespace attrcheck::rt
