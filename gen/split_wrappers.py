"""The C get, set and delete wrappers, in parts: their common case inline in the entry point
(runtime/fast_path.hpp, set_path.hpp), everything else in the out-of-line function that
gen_wrappers.out_of_line makes of the whole wrapper body (`part`: its Api's name, its name and
its lines)."""
from spec import require


def split_get(fn, lang, part):
    """A C get wrapper in two parts, so that the common call costs only what it must: inline, a
    query this thread already checked whose cached answer is current (fast_path.hpp: cached_query;
    no mode test, no rt::Call, no lambda, few registers to save); everything else (mode=off, null
    arguments, an answer to refresh, the full hook) in an out-of-line function of its own, entered
    by a tail call."""
    o, kv = require(fn, "object"), require(fn, "keyval")
    v, f = require(fn, "value_out"), require(fn, "flag_out")
    h, k = lang.handle(o, fn["kind"]), lang.key(kv)
    api, full, lines = part
    # One compare after the lookup (fast_path.hpp: quick_answer) says the answer is current, in
    # shadow mode, with no thread's sets pending: the mode test and the pending test cost the
    # shadow path three instructions more. Otherwise emulate mode answers, and shadow mode with
    # this thread's own sets pending cross-checks, as usual (another thread's: out of line).
    lines += [lang.signature() + " {",
              f"  if ({v} != nullptr && {f} != nullptr)",
              f"    if (const rt::QueryCache::Entry* q_ = rt::cached_query({api}, {h}, {k})) {{",
              f"      if (__builtin_expect(!rt::quick_answer(*q_), 0)) {{",
              f"        if (!rt::current_answer(*q_) || rt::pending_elsewhere()) return {full}({lang.args}, __builtin_return_address(0));",
              f"        if (!rt::g_shadow) return rt::answer({api}.binding, q_->flag, q_->word, {v}, {f});",
              "      }",
              f"      rt::GetOut o_{{{v}, {f}}};",
              "      rt::keep_in_memory(o_);",
              f"      const int rc_ = {lang.call_pmpi};",
              "      rt::keep_in_memory(o_);",
              f"      if (__builtin_expect(rt::agrees({api}.binding, *q_, rc_, o_.value, o_.flag), 1)) return rc_;",
              f"      return rt::get_diverged(&{api}, __builtin_return_address(0), q_, rc_, o_.value, o_.flag);",
              "    }",
              f"  return {full}({lang.args}, __builtin_return_address(0));",
              "}"]
    return lines


def split_set(fn, lang, part):
    """A C set wrapper in parts (as split_get): the set of a query this thread already checked,
    while sets are deferred, in a function of its mode's (set_path.hpp: set_deferred, shadow: the
    library makes it and attrcheck defers it; set_deferred_emulated; the library call by value,
    no rt::FnRef, no mode test beyond defer_sets'); everything else (mode=off, an answer to
    refresh, the full hook) out of line."""
    o, kv, v = require(fn, "object"), require(fn, "keyval"), require(fn, "value")
    h, k = lang.handle(o, fn["kind"]), lang.key(kv)
    api, full, lines = part
    # Each mode's quick way has a function of its own: inline in the entry point, its register
    # saves and frame were made before the mode test, ~20 instructions on every emulated set
    # (callgrind); in one function for both modes, the shadow set paid a test of the mode and
    # registers for the emulated one's. The entry point is a test of defer_sets and tail calls.
    lines.append("namespace {")
    for part, quick in (("deferred", "set_deferred"), ("emulated", "set_deferred_emulated")):
        lines += [f"[[gnu::noinline]] int {fn['name']}_{part}({fn['params']}, const void* caller_) {{",
                  f"  if (rt::QueryCache::Entry* q_ = rt::set_entry({api}, {h}, {k})) {{",
                  "    int rc_;",
                  f"    if (rt::{quick}({api}, caller_, *q_, {h}, {k}, {lang.word(v)},",
                  f"                    [=]() {{ return {lang.call_pmpi}; }}, &rc_))",
                  "      return rc_;",
                  "  }",
                  f"  return {full}({lang.args}, caller_);",
                  "}"]
    lines += ["}  // namespace", "",
              lang.signature() + " {",
              "  const std::uint8_t d_ = rt::deferring_sets();",
              f"  if (d_ == rt::kDeferShadow) return {fn['name']}_deferred({lang.args}, __builtin_return_address(0));",
              f"  if (d_) return {fn['name']}_emulated({lang.args}, __builtin_return_address(0));",
              f"  return {full}({lang.args}, __builtin_return_address(0));",
              "}"]
    return lines


def split_delete(fn, lang, part):
    """A C delete wrapper in two parts (as split_get): inline, a query this thread already checked
    (set_path.hpp: checked_delete) handed to its mode's quick way (the cancelling of a deferred set
    in shadow mode, which alone needs the library; the cursor in emulate mode); everything else
    out of line."""
    o, kv = require(fn, "object"), require(fn, "keyval")
    h, k = lang.handle(o, fn["kind"]), lang.key(kv)
    api, full, lines = part
    # (The mode tested once: checked_delete's halves written out, shadow_delete_entry and
    # checked_set.)
    lines += [lang.signature() + " {",
              "  if (rt::g_shadow) {",
              f"    if (rt::QueryCache::Entry* q_ = rt::shadow_delete_entry({api}, {h}, {k})) {{",
              f"      const rt::Call call{{&{api}, __builtin_return_address(0)}};",
              "      int rc_;",
              f"      if (rt::delete_cancels_set(call, *q_, {h}, {k}, [=]() {{ return {lang.call_pmpi}; }}, &rc_)) return rc_;",
              "    }",
              f"  }} else if (rt::QueryCache::Entry* q_ = rt::checked_set({api}, {h}, {k})) {{",
              f"    const rt::Call call{{&{api}, __builtin_return_address(0)}};",
              "    int rc_;",
              f"    if (rt::delete_emulated(call, *q_, {h}, {k}, &rc_)) return rc_;",
              "  }",
              f"  return {full}({lang.args}, __builtin_return_address(0));",
              "}"]
    return lines
