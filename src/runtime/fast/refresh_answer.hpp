// A cached query's answer read afresh from the engine (refresh_answer.cpp). Not a public header.
#pragma once

#include <cstdint>

#include "runtime/fast/query_cache.hpp"

namespace attrcheck::rt {

// For a cached query whose answer is out of date: if the query is still valid, reads the
// engine's answer into it. False if the full hook must decide (the query's validity may have
// changed, an error, a truncated value, or the version read mid-change so no answer could be
// kept).
bool refresh_answer(QueryCache::Entry& q, std::uint64_t version) noexcept;

}  // namespace attrcheck::rt
