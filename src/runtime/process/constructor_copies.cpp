// The constructor copies (constructor_copies.hpp): a small table under the objects' lock, empty
// unless the program used such a constructor on an object carrying attributes with copy callbacks.
#include "runtime/process/constructor_copies.hpp"

#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/process/findings.hpp"
#include "runtime/process/keyvals.hpp"
#include "runtime/process/portability.hpp"
#include "runtime/process/provenance.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

std::atomic<bool> g_constructed_copies{false};

namespace {

struct Copied {
  ObjectKind kind;
  Handle object;
  int engine_key;
  Question question;  // the constructor's divergence, as a portability question
  const char* constructor;  // its name (the wrapper's, a literal)
  bool copied;        // the constructor copied it here (or ran its copy callback)
  bool dup_fn;        // its copy callback is the predefined dup: a copy is certain where it runs
  Origin constructed_at;
};

std::vector<Copied>& table() {
  static std::vector<Copied>* t = new std::vector<Copied>;  // never destroyed: late gets read it
  return *t;
}

constexpr std::size_t kMaxCopied = 4096;  // bounded: the oldest are forgotten past it

// The portability question of the CopiesAttributes divergence seen at `call`, if it is one.
bool question_of(const char* call, Question* q, const char** divergence) {
  for (const KnownDivergence& d : kDivergences) {
    if (d.site != DivergenceSite::CopiesAttributes || !call_listed(d.call, call)) continue;
    for (std::size_t i = 0; i < sizeof kPortability / sizeof kPortability[0]; ++i)
      if (!std::strcmp(kPortability[i].question, d.id)) {
        *q = static_cast<Question>(i);
        *divergence = d.id;
        return true;
      }
  }
  return false;
}

}  // namespace

void note_constructed(const Call& call, ObjectKind kind, Handle parent, Handle fresh) {
  Question q;
  const char* divergence = nullptr;
  if (!parent || !call.api || !question_of(call.api->name, &q, &divergence)) return;
  Runtime& r = state();
  // Here the library copies (shadow mode on a series that does); emulate mode serves the calls
  // from attrcheck's cache, which copies nothing here, as the standard says.
  const bool copies = r.mode == Mode::Shadow && release_has(release(), divergence);
  std::vector<Copied> found;
  for (const AttributeInfo& a : r.engine->attributes(kind, parent)) {
    if (a.predefined) continue;
    KeyvalInfo info;
    if (!r.engine->keyval_info(a.keyval, &info) || info.spec.copy.action == CopyAction::NullCopy) continue;
    found.push_back(
        {kind, fresh, a.keyval, q, call.api->name, copies, info.spec.copy.action == CopyAction::Dup, origin_site(call)});
  }
  if (found.empty()) return;
  std::lock_guard<std::mutex> lock(r.freed_mu);
  auto& t = table();
  if (t.size() + found.size() > kMaxCopied) t.erase(t.begin(), t.begin() + static_cast<long>(t.size() / 2));
  t.insert(t.end(), found.begin(), found.end());
  g_constructed_copies.store(true, std::memory_order_release);
}

namespace {
// Drops the records of `h` (of its `engine_key` only, if `one_key`). The caller holds freed_mu.
void forget(ObjectKind kind, Handle h, bool one_key, int engine_key) {
  auto& t = table();
  for (std::size_t i = 0; i < t.size();)
    if (t[i].kind == kind && t[i].object == h && (!one_key || t[i].engine_key == engine_key)) {
      t[i] = t.back();
      t.pop_back();
    } else {
      ++i;
    }
}
}  // namespace

void forget_constructed(ObjectKind kind, Handle h) {
  if (g_constructed_copies.load(std::memory_order_acquire)) forget(kind, h, false, 0);  // (under freed_mu)
}

void forget_constructed_key(ObjectKind kind, Handle h, int engine_key) {
  std::lock_guard<std::mutex> lock(state().freed_mu);
  forget(kind, h, true, engine_key);
}

bool note_constructed_get(const Call& call, ObjectKind kind, Handle h, int engine_key, int user_key, bool found) {
  Copied c{};
  {
    std::lock_guard<std::mutex> lock(state().freed_mu);
    const auto& t = table();
    std::size_t i = 0;
    while (i < t.size() && !(t[i].kind == kind && t[i].object == h && t[i].engine_key == engine_key)) ++i;
    if (i == t.size()) return false;
    c = t[i];
  }
  // Certain only where the get's answer follows from the constructor: it found the copy the
  // constructor made, or found nothing where a constructor that copies would have run the copy
  // callback (an attribute set on the object since answers the same everywhere).
  if (found != c.copied) return true;
  FindingInput in = finding(Rule::Count, call);
  in.has_keyval = true;
  in.keyval = user_key;
  in.has_object = true;
  in.kind = kind;
  in.object = h;
  ProvenanceStorage storage;
  add_provenance(in, storage, "object created", c.constructed_at);
  const char* const name = c.constructor;
  char yes[200], no[200];
  Appender y{yes, sizeof yes}, n{no, sizeof no};
  y.put(name);
  y.put(" copies the parent's attributes: ");
  y.put(c.dup_fn ? "this get finds the copy MPI_COMM_DUP_FN made" : "its copy callback runs for this keyval, and this get finds the copy it makes");
  n.put(name);
  n.put(" copies no attributes (only the dup family does): this get finds none");
  depended_on(c.question, in, c.copied, yes, no);
  return true;
}

}  // namespace attrcheck::rt
