// What MPICH does after a replacing MPI_Type_set_attr / MPI_Win_set_attr that ran no delete
// callback (the profile's replacing-set-attr-keeps-old-value): the object then holds both values,
// and the library acts on the one it kept where the standard knows none: it copies it at
// MPI_Type_dup and deletes it when the object is freed. Shadow mode remembers each kept value
// (the object, the keyval, the value), so that a run on exactly that value is the known
// divergence, noted once per run, and nothing is said at the program's call. Only values the
// library was seen to keep are remembered; a run on any other value is what it always was.
#pragma once

#include <cstdint>

#include "attrcheck/engine.hpp"
#include "runtime/process/findings.hpp"

namespace attrcheck::rt {

struct Observation;

// A delete callback the standard requires was not run by `call` for the value `value` of
// `engine_key` on `object`: if the running release lists that as replacing-set-attr-keeps-old-value
// at this call, the library kept the value; remembered.
void kept_value_if_known(const Call& call, ObjectKind kind, Handle object, int engine_key, std::uint64_t value) noexcept;

// Whether the run `o`, which no model call asked for, is the library acting on a value it kept:
// then it has been noted (library.divergence) and is accounted for. It is if the value was seen
// kept, or if the model took another run for the same attribute in this call (`twice`: a datatype
// or window attribute copied or deleted twice holds two values, which is this divergence; so a
// kept value is known even where its set ran no callback to miss, a keyval with no delete
// function). A delete forgets the value; a copy that kept it (flag 1) remembers the copy's value,
// on whatever object the copy went to.
bool kept_value_run(const Call& call, const Observation& o, bool twice) noexcept;

// Whether the library's answer `value` to a get of `engine_key` on `object` is a value it kept
// (a replacing set kept it, and deleting the attribute then left it): noted, as the same divergence.
bool kept_value_answer(const Call& call, ObjectKind kind, Handle object, int engine_key, std::uint64_t value) noexcept;

// A delete callback the library ran, at `call`, on an object the program does not hold: if the
// running release lists that at this call (win-constructors-dup-communicator, at MPI_Win_free:
// the communicator the window's constructor duplicated), it is noted.
void hidden_object_run(const Call& call, const Observation& o) noexcept;

}  // namespace attrcheck::rt
