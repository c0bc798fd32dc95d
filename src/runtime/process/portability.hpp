// The portability report: where the program is seen to depend on how its MPI library answers a
// question of the library profiles (PORTABILITY in mpi_profile.def), one finding
// portability.QUESTION at the program's site names the release series that answer otherwise, from
// the profiles' answers. Info, or warning where one of those series is one the run must be
// portable to (--portable-to, ATTRCHECK_PORTABLE_TO).
#pragma once

#include "checks/rules.hpp"
#include "runtime/process/findings.hpp"

namespace attrcheck::rt {

#define LIBRARY(...)
#define RELEASE(...)
#define DIVERGENCE(...)
#define BEHAVIOUR(...)
#define SEEN(...)
#define ERROR_CLASS(...)
#define PORTABILITY(Enum, question, seen, hint) Enum,
enum class Question : unsigned char {
#include "runtime/profile/mpi_profile.def"
};
#undef LIBRARY
#undef RELEASE
#undef DIVERGENCE
#undef BEHAVIOUR
#undef SEEN
#undef ERROR_CLASS
#undef PORTABILITY

// A yes / no question (a divergence or behaviour): `here` is what happened in this run; `if_yes`
// and `if_no` say what happens where the answer is yes and no ("MPI_Finalize runs this delete
// callback"). `in` is the finding at the program's site (rule, keyval, provenance: its rule and
// detail are set here).
void depended_on(Question q, FindingInput in, bool here, const char* if_yes, const char* if_no);
// An error-class situation: `here` is the class the call returns on this run's library
// ("MPI_SUCCESS", "abort"), `call` the call whose result it is; `lead` opens the message.
void depended_on_class(Question q, FindingInput in, const char* lead, const char* here, const char* call);

// The shadow cross-check saw the library depart from the standard as `known` says, at `call`
// (for `keyval` if has_keyval): the portability finding of its question, if it is one seen so
// (PORTABILITY ... "divergence").
void depended_on_divergence(const Call& call, const KnownDivergence& known, bool has_keyval, int keyval);

// ATTRCHECK_PORTABLE_TO: "all", or release series ids separated by commas -> Runtime::portable_to.
bool parse_portable_to(const char* text, std::uint32_t* series) noexcept;
// The accepted values, for the flag's message ("all, or any of openmpi-4.1, ...").
const char* portable_to_values() noexcept;

}  // namespace attrcheck::rt
