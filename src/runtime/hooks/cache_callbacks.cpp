// Emulate mode, the cache's delete callbacks (see cache_callbacks.hpp): the change made through
// the engine when the cache cannot finish it.
#include "runtime/hooks/cache_callbacks.hpp"

namespace attrcheck::rt {

int change_after_callback(const Call& call, const SetCursor& cursor, Handle h, int key,
                                            std::uint64_t old, const std::uint64_t* word) {
  settle();
  Engine& e = *state().engine;
  const ObjectKind kind = call.api->kind;
  const RanDelete ran{h, key, old, MPI_SUCCESS};
  const Origin origin = word ? origin_site(call) : 0;
  if (word ? e.set_attr_after_delete(cursor, Binding::C, *word, origin, ran) : e.delete_attr_ran(cursor, &ran))
    return MPI_SUCCESS;
  ReplayScope replay(call, true);
  replay.replay().seen.push_back(Observation{false, kind, h, key, MPI_SUCCESS, old, 0, 0, false, 0});
  const Result res = word ? e.set_attr(kind, h, key, Binding::C, *word, origin) : e.delete_attr(kind, h, key);
  replay.finish();
  return res.ok() ? MPI_SUCCESS : refuse(call, res, kind, h, key, key);
}

}  // namespace attrcheck::rt
