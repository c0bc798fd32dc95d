// The portability findings (portability.hpp): which release series answer a question otherwise,
// read from the profile tables, and the finding that names them.
#include "runtime/process/portability.hpp"

#include <cstring>

#include "runtime/process/abi.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

namespace {

constexpr std::size_t kQuestions = sizeof kPortability / sizeof kPortability[0];
constexpr std::size_t kReleaseCount = sizeof kReleases / sizeof kReleases[0];
static_assert(kReleaseCount <= 32, "Runtime::portable_to holds a bit per release series");

// portability.QUESTION's rule: the PORTABILITY statements are the last rules (rules.def).
Rule rule_of(Question q) noexcept {
  return static_cast<Rule>(kRuleCount - static_cast<int>(kQuestions) + static_cast<int>(q));
}

// The release series attrcheck compares with: every known one, library by library, oldest first.
template <typename F>
void for_each_series(F&& f) {
  for (const MpiProfile& p : kProfiles)
    for (const ReleaseProfile& r : kReleases)
      if (p.library != Library::Unknown && r.library == p.library) f(r);
}

// "here" as the finding names it: the running series, or attrcheck's cache in emulate mode. After
// the keyval the finding is about, if any (part of its identity in a merged report, which tells
// findings at one site apart by their messages).
void put_here(Appender& a, const FindingInput& in) {
  if (in.has_keyval) {
    a.put("keyval ");
    a.keyval(in.keyval);
    a.put(": ");
  }
  if (state().mode == Mode::Emulate) {
    a.put("here (attrcheck's cache, emulate mode, on ");
  } else {
    a.put("here (");
  }
  a.put(release().id);
  if constexpr (kStandardAbi) a.put(", the standard ABI");
  a.put(")");
}

void report_portability(Question q, FindingInput& in, const char* detail, const char* here, const char* series,
                        std::uint32_t mask) {
  in.rule = rule_of(q);
  in.detail = detail;
  in.portability_here = here;
  in.portability_series = series;
  in.severity = (mask & state().portable_to) ? static_cast<int>(Severity::Warning) : static_cast<int>(Severity::Info);
  report(in);
}

// What a situation's answer means, after the call's name: "returns MPI_ERR_INTERN".
void put_outcome(Appender& a, const char* call, const char* cls) {
  if (!std::strcmp(cls, "unprobed")) {
    a.put("what ");
    a.put(call);
    a.put(" does is not probed");
  } else if (!std::strcmp(cls, "abort")) {
    a.put("the process aborts in ");
    a.put(call);
  } else if (!std::strcmp(cls, "MPI_SUCCESS")) {
    a.put(call);
    a.put(" succeeds");
  } else {
    a.put(call);
    a.put(" fails with ");
    a.put(cls);
  }
}

}  // namespace

void depended_on(Question q, FindingInput in, bool here, const char* if_yes, const char* if_no) {
  const char* question = kPortability[static_cast<std::size_t>(q)].question;
  char series[128] = "", shown[160] = "";
  Appender s{series, sizeof series}, listed{shown, sizeof shown};
  std::uint32_t mask = 0;
  for_each_series([&](const ReleaseProfile& r) {
    if (release_has(r, question) == here) return;
    if (mask) s.put(" "), listed.put(", ");
    s.put(r.id);
    listed.put(r.id);
    mask |= 1u << static_cast<unsigned>(r.release);
  });
  if (!mask) return;  // every series does what this run did
  char detail[384];
  Appender a{detail, sizeof detail};
  put_here(a, in);
  a.put(" ");
  a.put(here ? if_yes : if_no);
  a.put("; on ");
  a.put(shown);
  a.put(" ");
  a.put(here ? if_no : if_yes);
  report_portability(q, in, detail, here ? "yes" : "no", series, mask);
}

void depended_on_class(Question q, FindingInput in, const char* lead, const char* here, const char* call) {
  const char* situation = kPortability[static_cast<std::size_t>(q)].question;
  char series[128] = "";
  Appender s{series, sizeof series};
  std::uint32_t mask = 0;
  for_each_series([&](const ReleaseProfile& r) {
    const char* cls = error_class_of(r, situation);
    if (!cls || !std::strcmp(cls, here)) return;
    if (mask) s.put(" ");
    s.put(r.id);
    mask |= 1u << static_cast<unsigned>(r.release);
  });
  if (!mask) return;
  char detail[384];
  Appender a{detail, sizeof detail};
  a.put(lead);
  put_here(a, in);
  a.put(" ");
  put_outcome(a, call, here);
  // The other answers, each once, with the series that give it.
  const char* done[kReleaseCount] = {};
  std::size_t n_done = 0;
  for_each_series([&](const ReleaseProfile& r) {
    const char* cls = error_class_of(r, situation);
    if (!cls || !std::strcmp(cls, here)) return;
    for (std::size_t i = 0; i < n_done; ++i)
      if (!std::strcmp(done[i], cls)) return;
    done[n_done++] = cls;
    a.put("; on ");
    bool first = true;
    for_each_series([&](const ReleaseProfile& o) {
      const char* c = error_class_of(o, situation);
      if (!c || std::strcmp(c, cls)) return;
      if (!first) a.put(", ");
      first = false;
      a.put(o.id);
    });
    a.put(" ");
    put_outcome(a, call, cls);
  });
  report_portability(q, in, detail, here, series, mask);
}

void depended_on_divergence(const Call& call, const KnownDivergence& known, bool has_keyval, int keyval) {
  for (std::size_t i = 0; i < kQuestions; ++i) {
    if (!kPortability[i].at_divergence || std::strcmp(kPortability[i].question, known.id)) continue;
    FindingInput in = finding(Rule::Count, call);
    in.has_keyval = has_keyval;
    in.keyval = keyval;
    char yes[160];
    Appender y{yes, sizeof yes};
    y.put("the library departed from the standard in this call (");
    y.put(known.id);
    y.put(": its library.divergence note says how)");
    depended_on(static_cast<Question>(i), in, true, yes, "the library does as the standard says here");
    return;
  }
}

bool parse_portable_to(const char* text, std::uint32_t* out) noexcept {
  unsigned mask = 0;
  if (parse_release_list(text, &mask)) return false;
  *out = mask;
  return true;
}

const char* portable_to_values() noexcept {
  static char values[256] = "";
  if (!values[0]) {
    Appender a{values, sizeof values};
    a.put("all, or release series separated by commas:");
    for_each_series([&](const ReleaseProfile& r) {
      a.put(" ");
      a.put(r.id);
    });
  }
  return values;
}

}  // namespace attrcheck::rt
