// The findings store (report.hpp): a finding recorded once per rule, site, call and message, and
// counted after; one writer at a time, never waiting in a signal handler.
#include "report/report.hpp"
#include "report/python_frames.hpp"

#include "attrcheck/provenance.hpp"
#include "report/maps.hpp"

#include <dlfcn.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <new>

namespace attrcheck {

namespace {
// A keyval's callback as a finding keeps it: the predefined one's name, else MODULE+0xOFFSET of
// the function's entry (0xADDRESS where no module holds it).
void describe_callback(const char* name, const void* fn, char* out, std::size_t size) noexcept {
  Appender a{out, size};
  if (name) {
    a.put(name);
    return;
  }
  Dl_info dl{};
  if (fn && dladdr(fn, &dl) && dl.dli_fname) {
    char path[PATH_MAX];
    module_path(dl.dli_fname, path, sizeof path);
    a.put(path);
    a.put("+");
    a.hex(static_cast<unsigned long long>(static_cast<const char*>(fn) - static_cast<const char*>(dl.dli_fbase)));
    return;
  }
  a.hex(reinterpret_cast<std::uintptr_t>(fn));
}
}  // namespace

void FindingStore::record(const FindingInput& in) noexcept { record_impl(in, false); }
void FindingStore::record_async_signal_safe(const FindingInput& in) noexcept { record_impl(in, true); }

namespace {
// Text into a running FNV-1a hash, with hexadecimal numbers (handles, addresses) left out.
std::uint64_t hash_text(const char* s, std::uint64_t h) noexcept {
  while (s && *s) {
    if (s[0] == '0' && s[1] == 'x') {
      for (s += 2; (*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'); ++s) {}
      h = (h ^ '#') * 0x100000001b3ULL;
      continue;
    }
    h = (h ^ static_cast<unsigned char>(*s++)) * 0x100000001b3ULL;
  }
  return (h ^ '|') * 0x100000001b3ULL;
}

// A message's identity without building it: what the rule's template fills in, with hex numbers
// left out, as the merge of rank reports does ({call} and {keyval} are compared on their own). So
// MPI_COMM_WORLD and MPI_COMM_SELF freed at one site are two findings, while one site failing on
// many anonymous handles ("comm 0x...") stays one.
std::uint64_t message_identity(const char* tmpl, const FindingInput& in) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char* p = tmpl ? std::strchr(tmpl, '{') : nullptr; p; p = std::strchr(p, '{')) {
    const char* end = std::strchr(p, '}');
    if (!end) break;
    const std::size_t len = static_cast<std::size_t>(end - p - 1);
    auto is = [&](const char* name) { return std::strlen(name) == len && std::strncmp(p + 1, name, len) == 0; };
    if (is("object")) h = hash_text(in.object_name && in.object_name[0] ? in.object_name : to_string(in.kind), h);
    else if (is("detail")) h = hash_text(in.detail, h);
    else if (is("replacement")) h = hash_text(in.replacement, h);
    p = end + 1;
  }
  return h;
}
}  // namespace

namespace {
// The entries, then the stack index (both zero until touched).
constexpr std::size_t kEntriesBytes = FindingStore::kCapacity * sizeof(Finding);
}  // namespace

FindingStore::FindingStore() noexcept {
  static_assert(kStackIndex > kCapacity * (1 + kMaxProvenance), "the stack index never fills");
  static_assert(kEntriesBytes % alignof(StackIndexSlot) == 0);
  const std::size_t bytes = kEntriesBytes + kStackIndex * sizeof(StackIndexSlot);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    entries_ = nullptr;
    return;
  }
  entries_ = static_cast<Finding*>(p);
  stack_index_ = reinterpret_cast<StackIndexSlot*>(static_cast<char*>(p) + kEntriesBytes);
}

FindingStore::~FindingStore() {
  if (python_) ::munmap(python_, kPythonFrames * sizeof(PythonFrame));
  if (!entries_) return;
  for (std::size_t i = 0, n = size(); i < n; ++i) entries_[i].~Finding();
  ::munmap(entries_, kEntriesBytes + kStackIndex * sizeof(StackIndexSlot));
}

void FindingStore::record_impl(const FindingInput& in, bool signal_safe) noexcept {
  const RuleInfo& info = rule_info(in.rule);
  const std::uint64_t message_hash = message_identity(info.message, in);
  const void* python_site = !signal_safe && in.python_depth > 0 && in.python_frames ? in.python_frames[0] : nullptr;
  // The same rule at the same site from the same call with the same message (for the same
  // keyval) is one finding: count it. Entries are only ever appended and committed once filled,
  // so this scan needs no lock.
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i) {
    Finding& f = entries_[i];
    if (!f.committed.load(std::memory_order_acquire)) continue;
    // The keyval is part of the identity: two keyvals leaked at one MPI_Finalize are two findings.
    if (f.rule == in.rule && f.site == in.site && f.python_site == python_site && f.message_hash == message_hash &&
        f.has_keyval == in.has_keyval &&
        (!in.has_keyval || f.keyval == in.keyval) && std::strncmp(f.call, in.call ? in.call : "", sizeof f.call) == 0) {
      f.count.fetch_add(1, std::memory_order_relaxed);
      version_.fetch_add(1, std::memory_order_release);
      return;
    }
  }
  // A new finding: one writer at a time. A signal handler must not wait (the interrupted code may
  // hold the flag), so it gives up instead.
  if (!take_writer(!signal_safe)) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::size_t slot = used_.load(std::memory_order_relaxed);
  if (slot >= kCapacity || !entries_) {
    busy_.store(false, std::memory_order_release);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Finding& f = *new (&entries_[slot]) Finding;  // plain stores into the mapping: signal-safe
  f.rule = in.rule;
  f.severity = in.severity >= 0 && in.severity <= static_cast<int>(Severity::Info) ? static_cast<Severity>(in.severity)
                                                                                 : info.severity;
  copy_str(f.portability_here, sizeof f.portability_here, in.portability_here);
  copy_str(f.portability_series, sizeof f.portability_series, in.portability_series);
  f.site = in.site;
  f.site_is_entry = in.site_is_entry;
  f.python_site = python_site;
  f.python_site_frame = python_site ? intern_python(python_site) : -1;
  f.message_hash = message_hash;
  f.has_keyval = in.has_keyval;
  f.keyval = in.keyval;
  f.has_object = in.has_object;
  f.kind = in.kind;
  f.object = in.object;
  copy_str(f.call, sizeof f.call, in.call);
  copy_str(f.object_name, sizeof f.object_name, in.object_name);
  expand_template(info.message, in, f.message, sizeof f.message);
  expand_template(info.hint, in, f.hint, sizeof f.hint);
  f.symbol[0] = f.module[0] = '\0';
  f.offset = 0;
  if (in.site_symbol) {
    copy_str(f.symbol, sizeof f.symbol, in.site_symbol);
  } else if (signal_safe && in.site) {
    modules_from_maps(&in.site, 1, [](void* c, int, const char* path, std::uint64_t offset) {
      auto* out = static_cast<Finding*>(c);
      copy_str(out->module, sizeof out->module, path);
      out->offset = offset;
    }, &f);
  } else if (!signal_safe && in.site) {
    Dl_info dl{};
    if (dladdr(in.site, &dl) && dl.dli_fname) {
      module_path(dl.dli_fname, f.module, sizeof f.module);
      f.offset = static_cast<std::uint64_t>(static_cast<const char*>(in.site) - static_cast<const char*>(dl.dli_fbase));
      if (dl.dli_sname) {
        Appender a{f.symbol, sizeof f.symbol};
        a.put(dl.dli_sname);
        a.put("+");
        a.hex(static_cast<unsigned long long>(static_cast<const char*>(in.site) - static_cast<const char*>(dl.dli_saddr)));
      }
    }
  }
  f.has_callbacks = in.has_callbacks && !signal_safe;  // (dladdr is not async-signal-safe)
  if (f.has_callbacks) {
    describe_callback(in.callbacks.copy_name, in.callbacks.copy_fn, f.copy_callback, sizeof f.copy_callback);
    describe_callback(in.callbacks.delete_name, in.callbacks.delete_fn, f.delete_callback, sizeof f.delete_callback);
    f.extra_state = in.callbacks.extra_state;
  }
  f.stack.depth = 0;
  f.provenance_count = 0;
  if (signal_safe && in.fault_stack && in.fault_stack_depth > 0 && stack_depth_ > 0)
    resolve_stack_async_signal_safe(in.fault_stack, in.fault_stack_depth, stack_depth_, &f.stack);
  if (!signal_safe && stack_depth_ > 0 && !in.no_stack) {
    void* frames[kStackFrames + 24];
    const int captured = capture_stack(frames, stack_depth_ + 24, 0);
    if (python_site) {
      void* merged[kStackFrames * 2 + 24];
      const int merged_depth = merge_python_frames(frames, captured, in.python_frames, std::min(in.python_depth, kStackFrames),
                                        merged, static_cast<int>(sizeof merged / sizeof *merged));
      resolve_stack(merged, merged_depth, stack_depth_, &f.stack);
    } else {
      resolve_stack(frames, captured, stack_depth_, &f.stack);
    }
    for (int i = 0; i < in.provenance_count && i < kMaxProvenance; ++i) {
      const ProvenanceInput& p = in.provenance[i];
      if (!p.what || p.depth <= 0) continue;
      Finding::Provenance& out = f.provenance[f.provenance_count++];
      copy_str(out.what, sizeof out.what, p.what);
      resolve_stack(p.frames, p.depth, stack_depth_, &out.stack);
    }
  }
  number_stack(f.stack);
  for (int k = 0; k < f.provenance_count; ++k) number_stack(f.provenance[k].stack);
  f.count.store(1, std::memory_order_relaxed);
  f.committed.store(true, std::memory_order_release);
  used_.store(slot + 1, std::memory_order_release);
  version_.fetch_add(1, std::memory_order_release);
  // On disk before anything else can happen to the process (still the only writer: in order).
  if (Journal* j = journal_.load(std::memory_order_acquire)) j->append(*this, slot);
  busy_.store(false, std::memory_order_release);
}

bool FindingStore::take_writer(bool wait) noexcept {
  timespec start{};
  for (unsigned tried = 0; busy_.exchange(true, std::memory_order_acquire); ++tried) {
    if (!wait) return false;
    if (tried < 100) continue;
    if (tried == 100) clock_gettime(CLOCK_MONOTONIC, &start);
    sched_yield();
    if (tried % 256) continue;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= 2) return false;
  }
  return true;
}

void FindingStore::mark_gathered() noexcept {
  // (A writer stuck in a signal handler: marked all the same.)
  const bool taken = take_writer(true);
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i) {
    Finding& f = entries_[i];
    if (f.committed.load(std::memory_order_acquire)) f.gathered.store(f.count.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  if (Journal* j = journal_.load(std::memory_order_acquire)) j->mark_gathered(n);
  version_.fetch_add(1, std::memory_order_release);
  if (taken) busy_.store(false, std::memory_order_release);
}

void FindingStore::release_journal() noexcept {
  Journal* j = journal_.load(std::memory_order_acquire);
  if (!j) return;
  if (!take_writer(true)) return;
  j->hold(false);
  if (!j->active())
    for (std::size_t i = 0, n = size(); i < n; ++i) j->append(*this, i);
  busy_.store(false, std::memory_order_release);
}

void FindingStore::counts(std::uint64_t out[3]) const noexcept {
  out[0] = out[1] = out[2] = 0;
  const std::size_t n = size();
  for (std::size_t i = 0; i < n; ++i) {
    const Finding& f = entries_[i];
    if (!f.committed.load(std::memory_order_acquire)) continue;
    out[static_cast<int>(f.severity)] += f.count.load(std::memory_order_relaxed);
  }
}

bool FindingStore::any_at_or_above(int threshold) const noexcept {
  if (threshold < 0) return false;
  std::uint64_t c[3];
  counts(c);
  for (int s = 0; s <= threshold && s < 3; ++s)
    if (c[s]) return true;
  return false;
}

}  // namespace attrcheck
