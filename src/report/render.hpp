// The parts a rank report (render_json) and a journal line (journal.cpp) are both written from:
// a finding, a stack of the depot, the header with the run's identity. Written with FdWriter:
// nothing allocated.
#pragma once

#include "report/fd_writer.hpp"
#include "report/report.hpp"
#include "report/symbol_table.hpp"

#include <cstdint>

namespace attrcheck {

// What the in-process pass found for a frame or site (symbolize.hpp): "function", "file" and
// "line" where it found them, and "symbolized": true on every address it attempted.
void render_symbol(FdWriter& w, const SymbolTable* table, const void* address, bool entry) noexcept;
// A Python frame: {"python": true, "file": ..., "line": N, "function": ...}.
void render_python_frame(FdWriter& w, const FindingStore::PythonFrame& py) noexcept;
// A stack of the depot: {"id": N, "frames": [...]}.
void render_stack(FdWriter& w, const FindingStore& store, int id, const StackRec& s) noexcept;
// '{', the schema, the tool, and the run's identity ("run": { ... left open, so that a report
// can add its status).
void render_header(FdWriter& w, const char* schema, const RunInfo& run) noexcept;

// One finding as a JSON object; `stack_id(stack)` is the id its stacks are written under.
template <typename StackId>
void render_finding(FdWriter& w, int rank, const Finding& f, const FindingStore& store, StackId stack_id) noexcept {
  const SymbolTable* symbols = store.symbols();
  const RuleInfo& info = rule_info(f.rule);
  w.raw("{");
  w.key("rule"); w.str(info.id); w.raw(",");
  w.key("severity"); w.str(to_string(f.severity)); w.raw(",");
  w.key("message"); w.str(f.message); w.raw(",");
  if (f.portability_series[0]) {  // "portability": {"here": ..., "differs_on": ["openmpi-5.0", ...]}
    w.key("portability"); w.raw("{");
    w.key("here"); w.str(f.portability_here); w.raw(",");
    w.key("differs_on"); w.raw("[");
    char id[32];
    for (const char *p = f.portability_series, *end; *p; p = *end ? end + 1 : end) {
      end = p;
      while (*end && *end != ' ') ++end;
      const std::size_t n = static_cast<std::size_t>(end - p) < sizeof id ? static_cast<std::size_t>(end - p) : sizeof id - 1;
      for (std::size_t i = 0; i < n; ++i) id[i] = p[i];
      id[n] = '\0';
      if (p != f.portability_series) w.raw(",");
      w.str(id);
    }
    w.raw("]},");
  }
  w.key("hint"); w.str(f.hint); w.raw(",");
  w.key("call"); w.str(f.call); w.raw(",");
  w.key("rank"); w.num(rank); w.raw(",");
  w.key("count"); w.num(static_cast<long long>(f.count.load(std::memory_order_relaxed)));
  if (const std::uint64_t g = f.gathered.load(std::memory_order_relaxed)) {
    w.raw(","); w.key("gathered_count"); w.num(static_cast<long long>(g));
  }
  if (f.has_keyval) { w.raw(","); w.key("keyval"); w.num(f.keyval); }
  if (f.has_callbacks) {
    w.raw(","); w.key("keyval_callbacks"); w.raw("{");
    w.key("copy"); w.str(f.copy_callback); w.raw(",");
    w.key("delete"); w.str(f.delete_callback); w.raw(",");
    w.key("extra_state"); w.hex(f.extra_state);
    w.raw("}");
  }
  if (f.has_object) {
    w.raw(","); w.key("object"); w.raw("{");
    w.key("kind"); w.str(to_string(f.kind)); w.raw(",");
    w.key("handle"); w.hex(f.object);
    if (f.object_name[0]) { w.raw(","); w.key("name"); w.str(f.object_name); }
    w.raw("}");
  }
  if (f.stack.depth) { w.raw(","); w.key("stack"); w.num(stack_id(f.stack)); }
  if (f.provenance_count) {
    w.raw(","); w.key("provenance"); w.raw("[");
    for (int k = 0; k < f.provenance_count; ++k) {
      if (k) w.raw(",");
      w.raw("{"); w.key("what"); w.str(f.provenance[k].what);
      if (f.provenance[k].stack.depth) { w.raw(","); w.key("stack"); w.num(stack_id(f.provenance[k].stack)); }
      w.raw("}");
    }
    w.raw("]");
  }
  w.raw(","); w.key("site"); w.raw("{");
  w.key("address"); w.hex(reinterpret_cast<std::uintptr_t>(f.site)); w.raw(",");
  w.key("offset"); w.hex(f.offset); w.raw(",");
  w.key("symbol"); w.str(f.symbol); w.raw(",");
  w.key("module"); w.str(f.module);
  // A callback's entry address names its function as is; a return address is symbolized at
  // the call before it.
  if (f.site_is_entry) { w.raw(","); w.key("entry"); w.raw("true"); }
  render_symbol(w, symbols, f.site, f.site_is_entry);
  // Made from Python: the innermost Python frame, part of the finding's identity.
  if (const FindingStore::PythonFrame* py = store.python_frame(f.python_site_frame)) {
    w.raw(","); w.key("python"); render_python_frame(w, *py);
  }
  w.raw("}}");
}

}  // namespace attrcheck
