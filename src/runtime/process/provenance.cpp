// Where things happened, for findings (see provenance.hpp).
#include "runtime/process/provenance.hpp"

#include <algorithm>

#include "report/python_frames.hpp"
#include "runtime/process/state.hpp"
#include "runtime/python/python_frames.hpp"

namespace attrcheck::rt {

namespace {
// origin_here in a Python program: the native stack, with the thread's Python frames where the
// interpreter called into it; 0 when the thread holds no GIL (then the native stack alone).
__attribute__((noinline)) Origin origin_here_python(const Call& call) {
  Runtime& r = state();
  void* python[kStackFrames];
  const int py = python::capture(python, r.findings.stack_depth());
  if (py <= 0) return 0;
  void* native[kMaxStackDepth];
  const int depth = std::min(r.findings.stack_depth() + 8, kMaxStackDepth);
  const int n = call.frame ? capture_stack_from(call.frame, call.caller, native, depth) : capture_stack(native, depth, 0);
  void* merged[kMaxStackDepth];
  return r.depot.intern(merged, merge_python_frames(native, n, python, py, merged, kMaxStackDepth));
}

// origin_here without whole native stacks: the call site only (ATTRCHECK_PROVENANCE=site), or, in
// a Python program, the stack with the thread's Python frames (the native stack alone when the
// thread holds no GIL). Out of line: origin_here's common case stays a test and a walk.
__attribute__((noinline)) Origin origin_here_otherwise(const Call& call) {
  Runtime& r = state();
  if (!r.provenance_python_stacks) return origin_site(call);
  if (const Origin o = origin_here_python(call)) return o;
  if (call.frame) return r.depot.capture_from(call.frame, call.caller, r.findings.stack_depth());
  return r.depot.capture(r.findings.stack_depth() + 8, 1);
}
}  // namespace

Origin origin_here(const Call& call) {
  Runtime& r = state();
  if (r.findings.stack_depth() == 0) return 0;
  if (__builtin_expect(!r.provenance_stacks, 0)) return origin_here_otherwise(call);
  // From the wrapper's frame when it handed it over: the application's frames only.
  if (call.frame) return r.depot.capture_from(call.frame, call.caller, r.findings.stack_depth());
  return r.depot.capture(r.findings.stack_depth() + 8, 1);  // + frames of attrcheck itself, trimmed later
}

// The call site and the thread's innermost Python frame (SiteCache::miss in a Python program):
// sets and object creations are on hot paths, and their provenance is the call site natively;
// from Python it is the innermost Python frame (each frame costs a few calls into the
// interpreter: docs/performance.md, "Python programs").
constexpr int kSitePythonFrames = 1;
Origin origin_python_site(const void* site) {
  Runtime& r = state();
  void* frames[1 + kSitePythonFrames];
  frames[0] = const_cast<void*>(site);
  const int py = python::capture(frames + 1, std::min(r.findings.stack_depth(), kSitePythonFrames));
  return r.depot.intern(frames, 1 + py);
}

__thread SiteCache::Entry SiteCache::t_sites[SiteCache::kSize];

Origin SiteCache::miss(const void* site) {
  Runtime& r = state();
  if (r.findings.stack_depth() == 0 || !site) return 0;
  if (python::active()) return origin_python_site(site);  // (never cached: see provenance.hpp)
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

namespace {
// The predefined callbacks' names, as a keyval of that kind was given them.
const char* copy_callback_name(ObjectKind kind, const CopyCallback& c) noexcept {
  if (c.action == CopyAction::User) return nullptr;
  const bool dup = c.action == CopyAction::Dup;
  if (c.deprecated) return dup ? "MPI_DUP_FN" : "MPI_NULL_COPY_FN";
  switch (kind) {
    case ObjectKind::Comm: return dup ? "MPI_COMM_DUP_FN" : "MPI_COMM_NULL_COPY_FN";
    case ObjectKind::Type: return dup ? "MPI_TYPE_DUP_FN" : "MPI_TYPE_NULL_COPY_FN";
    case ObjectKind::Win: return dup ? "MPI_WIN_DUP_FN" : "MPI_WIN_NULL_COPY_FN";
  }
  return nullptr;
}

const char* delete_callback_name(ObjectKind kind, const DeleteCallback& d) noexcept {
  if (d.action == DeleteAction::User) return nullptr;
  if (d.deprecated) return "MPI_NULL_DELETE_FN";
  switch (kind) {
    case ObjectKind::Comm: return "MPI_COMM_NULL_DELETE_FN";
    case ObjectKind::Type: return "MPI_TYPE_NULL_DELETE_FN";
    case ObjectKind::Win: return "MPI_WIN_NULL_DELETE_FN";
  }
  return nullptr;
}
}  // namespace

void add_keyval_provenance(FindingInput& in, ProvenanceStorage& storage, int engine_key, bool freed) {
  KeyvalInfo info;
  if (!state().engine->keyval_info(engine_key, &info) || info.predefined) return;
  add_provenance(in, storage, "keyval created", info.created_at);
  if (freed) add_provenance(in, storage, "keyval freed", info.freed_at);
  // How it was made: what names a keyval whose functions have no names (a stripped library's).
  in.has_callbacks = true;
  in.callbacks.copy_name = copy_callback_name(info.spec.kind, info.spec.copy);
  in.callbacks.copy_fn = info.spec.copy.fn;
  in.callbacks.delete_name = delete_callback_name(info.spec.kind, info.spec.del);
  in.callbacks.delete_fn = info.spec.del.fn;
  in.callbacks.extra_state = info.spec.extra_state;
}


}  // namespace attrcheck::rt
