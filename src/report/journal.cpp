// The journal (report.hpp): each finding appended as a line as it is recorded, so that a rank
// killed before its report is written still leaves its findings.
#include "report/render.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace attrcheck {

bool Journal::start(const char* path, const RunInfo& run, FindingStore& store, bool now) noexcept {
  finish(store);
  std::snprintf(path_, sizeof path_, "%s", path);
  run_ = &run;
  failed_ = false;
  store.set_journal(this);
  if (!now || store.size() == 0) return true;  // created by the next finding
  // Findings recorded already: the file now, as their last one would make it. (One recorded
  // meanwhile is appended twice: the merge keeps one line per seq.)
  append(store, store.size() - 1);
  return active();
}

bool Journal::open_file() noexcept {
  if (fd_.load(std::memory_order_acquire) >= 0) return true;
  if (failed_ || !path_[0] || !run_) return false;
  ::unlink(path_);  // O_EXCL after unlink: never append through a symlink planted there
  const int fd = ::open(path_, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    failed_ = true;
    return false;
  }
  {
    FdWriter w(fd);
    render_header(w, kJournalSchema, *run_);
    w.raw("}}\n");
  }
  fd_.store(fd, std::memory_order_release);
  return true;
}

void Journal::append(const FindingStore& store, std::size_t index) noexcept {
  if (fd_.load(std::memory_order_acquire) < 0) {
    if (held_.load(std::memory_order_acquire)) return;
    // The first finding: the file, with the header and every finding before this one.
    if (!open_file()) return;
    for (std::size_t i = 0; i < index && i < store.size(); ++i) append(store, i);
  }
  const int fd = fd_.load(std::memory_order_acquire);
  if (fd < 0 || index >= store.size()) return;
  const Finding& f = store.at(index);
  if (!f.committed.load(std::memory_order_acquire)) return;
  // Its stacks inline, numbered within the line: 1 its own, then its provenance's.
  FdWriter w(fd);
  w.raw("{"); w.key("seq"); w.num(static_cast<long long>(index)); w.raw(",");
  w.key("finding");
  render_finding(w, -1, f, store, [&](const StackRec& s) {
    if (&s == &f.stack) return 1;
    for (int k = 0; k < f.provenance_count; ++k)
      if (&s == &f.provenance[k].stack) return 2 + k;
    return 0;
  });
  w.raw(","); w.key("stacks"); w.raw("[");
  bool first = true;
  if (f.stack.depth) {
    render_stack(w, store, 1, f.stack);
    first = false;
  }
  for (int k = 0; k < f.provenance_count; ++k) {
    if (!f.provenance[k].stack.depth) continue;
    if (!first) w.raw(",");
    first = false;
    render_stack(w, store, 2 + k, f.provenance[k].stack);
  }
  w.raw("]}\n");
}

void Journal::mark_gathered(std::size_t count) noexcept {
  const int fd = fd_.load(std::memory_order_acquire);
  if (fd < 0) return;  // (made later, its lines say gathered_count themselves)
  FdWriter w(fd);
  w.raw("{"); w.key("gathered"); w.num(static_cast<long long>(count)); w.raw("}\n");
}

void Journal::finish(FindingStore& store) noexcept {
  store.set_journal(nullptr);
  const int fd = fd_.exchange(-1, std::memory_order_acq_rel);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path_);  // (never created: nothing to remove, and never a stranger's file)
  }
  path_[0] = '\0';
  run_ = nullptr;
  held_.store(false, std::memory_order_release);
}

}  // namespace attrcheck
