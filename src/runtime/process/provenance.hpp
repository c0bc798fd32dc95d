// Where things happened, for findings: keyvals created and freed (whole stacks, or the call
// site), attributes set and objects created (the call site, cached per thread). Not a public
// header.
#pragma once

#include <cstdint>
#include <vector>

#include "attrcheck/engine.hpp"
#include "report/report.hpp"
#include "runtime/process/call.hpp"

namespace attrcheck::rt {

// Provenance. origin_here: the caller's stack (backtrace: microseconds; keyval create / free
// only, and only with ATTRCHECK_PROVENANCE=stack, else the call site); origin_site: just the call
// site, cached per thread (set, dup, constructors).
Origin origin_here(const Call& call);
// Call sites repeat (a library's set in a loop, a create/free pair): a small direct-mapped cache
// per thread keeps origin_site to a compare on the hot path; the depot is asked on a miss.
struct SiteCache {
  struct Entry {
    const void* site;
    Origin origin;
  };
  static constexpr int kSize = 16;
  static __thread Entry t_sites[kSize];
  // Multiplicative hash: neighbouring call sites (a create and a free 8 bytes apart) must not
  // share a bucket, or they evict each other forever.
  static Entry& slot(const void* site) noexcept {
    return t_sites[(reinterpret_cast<std::uintptr_t>(site) * 0x9E3779B97F4A7C15ULL) >> 60];
  }
  static Origin miss(const void* site);
};
static_assert(SiteCache::kSize == 16, "slot() hashes to 4 bits");
inline Origin origin_at(const void* site) {
  const SiteCache::Entry& e = SiteCache::slot(site);
  return e.site == site && e.site ? e.origin : SiteCache::miss(site);
}
// In a Python program (python::active) the cache is never filled, so every call misses: miss()
// then gives the call site and the Python frames that led to it (the call site alone is the same
// extension-module address for every call made from Python), which cannot be cached by site. A
// program without Python pays nothing for it on a hit.
inline Origin origin_site(const Call& call) { return origin_at(call.caller); }
// The call site and the thread's innermost Python frame(s) (python::capture), interned.
Origin origin_python_site(const void* site);
// Adds "<what>" with the stack of `origin` to a finding (frames kept in `storage`).
struct ProvenanceStorage {
  std::vector<void*> frames[kMaxProvenance];
};
void add_provenance(FindingInput& in, ProvenanceStorage& storage, const char* what, Origin origin);
// The keyval's own provenance: where it was created (and freed, when `freed`).
void add_keyval_provenance(FindingInput& in, ProvenanceStorage& storage, int engine_key, bool freed);

}  // namespace attrcheck::rt
