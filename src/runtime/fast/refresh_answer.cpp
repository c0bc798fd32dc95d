// A cached query's answer read afresh from the engine (see refresh_answer.hpp), after the pending
// sets the engine lacks.
#include "runtime/fast/refresh_answer.hpp"

#include "runtime/fast/pending.hpp"
#include "runtime/process/fast_state.hpp"
#include "runtime/process/state.hpp"
#include "runtime/process/thread_state.hpp"

namespace attrcheck::rt {

bool refresh_answer(QueryCache::Entry& q, std::uint64_t version) noexcept {
  if (pending_elsewhere()) {  // the engine lacks them
    settle_elsewhere();
    version = g_fast.version->load(std::memory_order_acquire);
    if (QueryCache::has_answer(q, version)) return true;
  }
  // The engine lacks the value q must read; or (MPI_THREAD_MULTIPLE) another thread applied them
  // and q's marks are to be cleared first (pending.cpp).
  if (t_state.pending.count && (t_state.pending.applied.load(std::memory_order_relaxed) || t_state.queries.other_pending(q))) {
    apply_pending();
    version = g_fast.version->load(std::memory_order_acquire);
    if (QueryCache::has_answer(q, version)) return true;
  }
  if (q.layout() != layout_stamp()) return false;
  std::uint64_t word = 0;
  int found = 0;
  bool truncated = false;
  const Result res =
      state().engine->get_attr(q.kind(), q.object, q.engine_key, q.binding(), &word, &found, &truncated);
  if (!res.ok() || truncated) return false;
  // (False if `version` was odd: another thread was changing the engine as it was read. The
  // answer read is the engine's, but q does not hold it, and callers answer from q.)
  return QueryCache::remember_answer(q, version, word, found);
}

}  // namespace attrcheck::rt
