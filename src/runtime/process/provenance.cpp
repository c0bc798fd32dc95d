// Where things happened, for findings (see provenance.hpp).
#include "runtime/process/provenance.hpp"

#include "runtime/process/state.hpp"

namespace attrcheck::rt {

Origin origin_here(const Call& call) {
  Runtime& r = state();
  if (r.findings.stack_depth() == 0) return 0;
  if (!r.provenance_stacks) return origin_site(call);
  // From the wrapper's frame when it handed it over: the application's frames only.
  if (call.frame) return r.depot.capture_from(call.frame, call.caller, r.findings.stack_depth());
  return r.depot.capture(r.findings.stack_depth() + 8, 1);  // + frames of attrcheck itself, trimmed later
}

__thread SiteCache::Entry SiteCache::t_sites[SiteCache::kSize];

Origin SiteCache::miss(const void* site) {
  Runtime& r = state();
  if (r.findings.stack_depth() == 0 || !site) return 0;
  void* frame = const_cast<void*>(site);
  Entry& e = slot(site);
  e.origin = r.depot.intern(&frame, 1);
  e.site = site;
  return e.origin;
}

void add_provenance(FindingInput& in, ProvenanceStorage& storage, const char* what, Origin origin) {
  if (!origin || in.provenance_count >= kMaxProvenance) return;
  std::vector<void*>& frames = storage.frames[in.provenance_count];
  frames = state().depot.frames(origin);
  if (frames.empty()) return;
  ProvenanceInput& p = in.provenance[in.provenance_count++];
  p.what = what;
  p.frames = frames.data();
  p.depth = static_cast<int>(frames.size());
}

void add_keyval_provenance(FindingInput& in, ProvenanceStorage& storage, int engine_key, bool freed) {
  KeyvalInfo info;
  if (!state().engine->keyval_info(engine_key, &info) || info.predefined) return;
  add_provenance(in, storage, "keyval created", info.created_at);
  if (freed) add_provenance(in, storage, "keyval freed", info.freed_at);
}

}  // namespace attrcheck::rt
