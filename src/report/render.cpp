// A rank report as JSON, and the per-rank summary on stderr (report.hpp), from the findings
// store; async-signal-safe.
#include "report/render.hpp"

namespace attrcheck {

// What the in-process pass found for a frame or site (symbolize.hpp): "function", "file" and
// "line" where it found them, and "symbolized": true on every address it attempted, so that
// attrcheck-report's pass leaves them alone.
void render_symbol(FdWriter& w, const SymbolTable* table, const void* address, bool entry) noexcept {
  const SymbolEntry* e = table && address ? table->find(lookup_pc(address, entry)) : nullptr;
  if (!e) return;
  if (e->function[0]) { w.raw(","); w.key("function"); w.str(e->function); }
  if (e->file[0]) { w.raw(","); w.key("file"); w.str(e->file); w.raw(","); w.key("line"); w.num(e->line); }
  w.raw(","); w.key("symbolized"); w.raw("true");
}

// A Python frame: {"python": true, "file": ..., "line": N, "function": ...}.
void render_python_frame(FdWriter& w, const FindingStore::PythonFrame& py) noexcept {
  w.raw("{"); w.key("python"); w.raw("true"); w.raw(",");
  w.key("file"); w.str(py.file); w.raw(",");
  w.key("line"); w.num(py.line); w.raw(",");
  w.key("function"); w.str(py.function);
  w.raw("}");
}

// A stack of the depot: {"id": N, "frames": [...]}.
void render_stack(FdWriter& w, const FindingStore& store, int id, const StackRec& s) noexcept {
  w.raw("{"); w.key("id"); w.num(id); w.raw(","); w.key("frames"); w.raw("[");
  for (int i = 0; i < s.depth; ++i) {
    if (i) w.raw(",");
    if (const FindingStore::PythonFrame* py = store.python_frame(s.frames[i].python)) {
      render_python_frame(w, *py);
      continue;
    }
    w.raw("{"); w.key("address"); w.hex(reinterpret_cast<std::uintptr_t>(s.frames[i].address)); w.raw(",");
    w.key("module"); w.str(store.module(s.frames[i].module)); w.raw(",");
    w.key("offset"); w.hex(s.frames[i].offset);
    if (s.frames[i].entry) { w.raw(","); w.key("entry"); w.raw("true"); }
    render_symbol(w, store.symbols(), s.frames[i].address, s.frames[i].entry);
    w.raw("}");
  }
  w.raw("]}");
}

// What a rank report and a journal both begin with: '{', the schema, the tool, and the run's
// identity ("run": { ... left open, so the report can add its status).
void render_header(FdWriter& w, const char* schema, const RunInfo& run) noexcept {
  w.raw("{");
  w.key("schema"); w.str(schema); w.raw(",");
  w.key("version"); w.str(kReportVersion); w.raw(",");
  w.key("tool"); w.raw("{"); w.key("name"); w.str("attrcheck"); w.raw(","); w.key("version"); w.str(kToolVersion); w.raw("},");
  w.key("run"); w.raw("{");
  w.key("rank"); w.num(run.rank); w.raw(",");
  w.key("size"); w.num(run.size); w.raw(",");
  w.key("pid"); w.num(run.pid); w.raw(",");
  w.key("job"); w.str(run.job); w.raw(",");
  w.key("spawned"); w.raw(run.spawned ? "true" : "false"); w.raw(",");
  w.key("mode"); w.str(run.mode); w.raw(",");
  w.key("on_error"); w.str(run.on_error); w.raw(",");
  w.key("thread_level"); w.str(run.thread_level); w.raw(",");
  w.key("mpi_library"); w.str(run.mpi_library); w.raw(",");
  w.key("mpi_profile"); w.str(run.mpi_profile);
}

bool render_json(int fd, const RunInfo& run, const FindingStore& store) noexcept {
  FdWriter w(fd);
  std::uint64_t c[3];
  store.counts(c);
  render_header(w, kReportSchema, run);
  w.raw(",");
  w.key("status"); w.str(run.status.load(std::memory_order_acquire)); w.raw(",");
  w.key("signal"); w.num(run.signal.load(std::memory_order_relaxed));
  w.raw("},\n");
  w.key("summary"); w.raw("{");
  w.key("error"); w.num(static_cast<long long>(c[0])); w.raw(",");
  w.key("warning"); w.num(static_cast<long long>(c[1])); w.raw(",");
  w.key("info"); w.num(static_cast<long long>(c[2])); w.raw(",");
  w.key("dropped"); w.num(static_cast<long long>(store.dropped()));
  w.raw("},\n");
  if (run.call_counts) {  // {"keyval": {"c": N, "fortran": N, "f08": N}, "attribute": ...}
    std::uint64_t n[kCallFamilies][kCallBindings];
    run.call_counts(n);
    w.key("intercepted"); w.raw("{");
    for (int f = 0; f < kCallFamilies; ++f) {
      if (f) w.raw(",");
      w.key(kCallFamilyNames[f]); w.raw("{");
      for (int b = 0; b < kCallBindings; ++b) {
        if (b) w.raw(",");
        w.key(kCallBindingNames[b]); w.num(static_cast<long long>(n[f][b]));
      }
      w.raw("}");
    }
    w.raw("},\n");
  }
  w.key("findings"); w.raw("[");
  bool first = true;
  for (std::size_t i = 0; i < store.size(); ++i) {
    const Finding& f = store.at(i);
    if (!f.committed.load(std::memory_order_acquire)) continue;
    w.raw(first ? "\n" : ",\n");
    first = false;
    render_finding(w, run.rank, f, store, [](const StackRec& st) { return st.id; });
  }
  w.raw(first ? "],\n" : "\n],\n");
  // The stack depot: every distinct stack once, at its first occurrence, referenced by id from
  // the findings (number_stack).
  w.key("stacks"); w.raw("[");
  bool first_stack = true;
  auto depot = [&](const StackRec& s) {
    if (!s.first) return;
    w.raw(first_stack ? "\n" : ",\n");
    first_stack = false;
    render_stack(w, store, s.id, s);
  };
  for (std::size_t i = 0; i < store.size(); ++i) {
    const Finding& f = store.at(i);
    if (!f.committed.load(std::memory_order_acquire)) continue;
    depot(f.stack);
    for (int k = 0; k < f.provenance_count; ++k) depot(f.provenance[k].stack);
  }
  w.raw(first_stack ? "]}\n" : "\n]}\n");
  w.flush();
  return w.ok();
}

void render_summary(int fd, const RunInfo& run, const FindingStore& store) noexcept {
  FdWriter w(fd);
  std::uint64_t c[3];
  store.counts(c);
  if (!c[0] && !c[1] && !c[2]) return;
  w.raw("==attrcheck== rank ");
  w.num(run.rank);
  w.raw(": ");
  w.num(static_cast<long long>(c[0])); w.raw(" error(s), ");
  w.num(static_cast<long long>(c[1])); w.raw(" warning(s), ");
  w.num(static_cast<long long>(c[2])); w.raw(" info\n");
  for (std::size_t i = 0; i < store.size(); ++i) {
    const Finding& f = store.at(i);
    if (!f.committed.load(std::memory_order_acquire)) continue;
    const RuleInfo& info = rule_info(f.rule);
    w.raw("==attrcheck==   ");
    w.raw(to_string(f.severity));
    w.raw(" ");
    w.raw(info.id);
    w.raw(" x");
    w.num(static_cast<long long>(f.count.load(std::memory_order_relaxed)));
    w.raw(": ");
    w.raw(f.message);
    const SymbolTable* symbols = store.symbols();
    const SymbolEntry* named = symbols && f.site ? symbols->find(lookup_pc(f.site, f.site_is_entry)) : nullptr;
    if (named && named->function[0]) {  // named in-process (symbolize.hpp)
      w.raw("\n==attrcheck==       at ");
      w.raw(named->function);
      if (named->file[0]) { w.raw(" ("); w.raw(named->file); w.raw(":"); w.num(named->line); w.raw(")"); }
    } else if (f.symbol[0]) {
      w.raw("\n==attrcheck==       at ");
      w.raw(f.symbol);
      if (f.module[0]) { w.raw(" ("); w.raw(f.module); w.raw(")"); }
    }
    w.raw("\n");
  }
}

}  // namespace attrcheck
