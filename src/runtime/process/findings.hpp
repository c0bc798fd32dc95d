// Findings as the runtime reports them: built for a call, recorded in the store (and the journal),
// the report rewritten where no later chance comes. Not a public header.
#pragma once

#include "attrcheck/engine.hpp"
#include "report/report.hpp"
#include "runtime/profile/mpi_profile.hpp"
#include "runtime/process/call.hpp"

namespace attrcheck::rt {

void report(const FindingInput& in);
FindingInput finding(Rule rule, const Call& call);
// Reports the finding matching an engine Status (nothing for Ok / callback failures).
void report_status(const Call& call, Status status, ObjectKind kind, Handle h, int user_key, int engine_key);
// `site`: where the cross-check saw it; a divergence the library's profile lists for that site and
// call is named by its id (mpi_profile.def).
void divergence(const Call& call, const char* detail, bool has_keyval = false, int keyval = 0,
                DivergenceSite site = DivergenceSite::Unclassified);
// impl.divergence: the library's result differs from the model's.
void result_divergence(const Call& call, int library_rc, Result model, int user_key);
const char* object_name(ObjectKind kind, Handle h) noexcept;
const char* kind_noun(ObjectKind kind) noexcept;  // "communicator", "datatype", "window"

}  // namespace attrcheck::rt
