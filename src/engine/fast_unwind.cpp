// The fast stack walk: DWARF call frame information, interpreted once per return address and
// cached per thread, so that a walk is a few loads per frame.
//
// Why: Debian's libraries and most user code are built without frame pointers, so a plain rbp
// walk (the sanitizers' fast unwinder) gets their frames wrong; a DWARF unwinder (libgcc's,
// libunwind's) is right but finds and interprets each frame's CFI on every call (libgcc) or goes
// through a general-purpose cache (libunwind: ~1,400 instructions for an MPI call's stack). Here,
// for each return address, the rule that gives its caller's frame — CFA = rsp + N or rbp + N, the
// return address at CFA - 8, the caller's rbp saved at CFA - K or left alone — is derived once from
// .eh_frame (libgcc's _Unwind_Find_FDE, then a small interpreter for the CFI subset compilers emit
// for ordinary functions) and kept in a 2-way set-associative per-thread table. Anything outside that
// subset (a CFA expression, stack realignment through another register, no FDE at all) makes the
// walk give up, and the caller unwinds the whole stack with the full unwinder: the result is the
// same stack either way, only the cost differs.
//
// Safety: every stack read is checked against the thread's stack bounds (from the current frame
// up to the top of the stack, found once per thread), and each frame's CFA must lie above the
// previous one, so a wrong rule can end a walk early or send it to the full unwinder but never
// fault or loop. A walk takes no lock and allocates nothing; filling a table entry does call into
// libgcc (which may lock). Signal frames (the kernel's rt_sigreturn trampoline) are walked through
// the ucontext the kernel saved.
//
// Invalidation: a rule is only as good as the code at its address. This file interposes dlclose
// and bumps a generation after each; a thread drops its table when the generation moved, so a
// module loaded later at the same address is read anew. (Unloads glibc makes internally, without
// dlclose, are not seen: a stale rule there could only mislead a walk within the stack bounds,
// and the first address without a rule sends it to the full unwinder.)
#include "fast_unwind.hpp"

#include "attrcheck/proc_maps.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#if ATTRCHECK_FAST_UNWIND
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstddef>
#endif

namespace attrcheck::detail {

std::atomic<std::uint64_t> g_modules_generation{1};

}  // namespace attrcheck::detail

// dlclose, interposed: the real one, then a new generation (after it, so that a module loaded at
// the same address later is always loaded after the bump). Default visibility: it must replace
// libc's for the whole process when the runtime is preloaded.
extern "C" __attribute__((visibility("default"))) int dlclose(void* handle) {
  using DlcloseFn = int (*)(void*);
  static const DlcloseFn real = reinterpret_cast<DlcloseFn>(dlsym(RTLD_NEXT, "dlclose"));
  const int rc = real ? real(handle) : -1;
  attrcheck::detail::g_modules_generation.fetch_add(1, std::memory_order_release);
  return rc;
}

#if !ATTRCHECK_FAST_UNWIND

namespace attrcheck::detail {
int fast_backtrace(const void*, void**, int, int) noexcept { return -1; }
int fast_backtrace_logged(const void*, void**, int, WalkLog*) noexcept { return -1; }
bool stack_unchanged(const WalkLog&) noexcept { return false; }
}  // namespace attrcheck::detail

#else

// libgcc's FDE lookup (unwind-dw2-fde.h, exported by libgcc_s since GCC 3.0; lock-free through
// glibc's _dl_find_object since GCC 12).
struct DwarfEhBases {
  void* tbase;
  void* dbase;
  void* func;
};
extern "C" const void* _Unwind_Find_FDE(void* pc, DwarfEhBases* bases);

namespace attrcheck::detail {

namespace {

// ---- the rules ----------------------------------------------------------------------------------

enum RuleKind : std::uint8_t {
  kRsp = 1,          // CFA = rsp + cfa_off
  kRbp = 2,          // CFA = rbp + cfa_off
  kEnd = 3,          // the outermost frame (return address undefined: _start, a thread's start)
  kSignal = 4,       // the kernel's rt_sigreturn trampoline: the interrupted state is a ucontext at rsp
  kUnsupported = 5,  // no FDE, or CFI beyond the subset: the full unwinder's
};

struct Rule {
  std::int32_t cfa_off;  // a multiple of 8
  std::int16_t rbp_off;  // the caller's rbp is saved at CFA + rbp_off (< 0, a multiple of 8); 0: not saved
  std::uint8_t unused;
  std::uint8_t kind;     // the return address is always at CFA - 8 (rules that say otherwise: kUnsupported)
};

// Per thread (no sharing, no atomics, nothing to lock in a signal handler), 2-way set-associative:
// a stack's return addresses are a few dozen, and two of them sharing a set must not evict each
// other on every walk. Keys: the return address, with bit 63 set for an exact address (a frame a
// signal interrupted: its rule is the one at that instruction, not at the one before it).
constexpr int kRuleSets = 256;
constexpr std::uintptr_t kExact = std::uintptr_t{1} << 63;
struct Slot {
  std::uintptr_t key;
  Rule rule;
};
struct RuleSet {
  Slot way[2];  // way[0] the most recently filled
};
__thread RuleSet t_rules[kRuleSets];
__thread std::uint64_t t_rules_generation;
__thread bool t_filling;  // a fill is under way on this thread (a signal handler's walk must not store)

// The thread's stack, [t_stack_bottom, t_stack_top): reads are allowed from the walk's first frame
// (which must lie in it) up to the top.
__thread std::uintptr_t t_stack_bottom;
__thread std::uintptr_t t_stack_top;
__thread std::uint8_t t_stack_state;  // 0 unknown, 1 known, 2 unavailable

inline RuleSet& set_for(RuleSet* table, std::uintptr_t key) noexcept {
  return table[(key * 0x9e3779b97f4a7c15ULL) >> (64 - 8)];
}
static_assert(kRuleSets == 256, "set_for takes the top 8 bits");

// ---- reading .eh_frame --------------------------------------------------------------------------

struct Reader {
  const std::uint8_t* p;
  const std::uint8_t* end;
  bool ok = true;

  bool has(std::size_t n) noexcept {
    if (ok && static_cast<std::size_t>(end - p) >= n) return true;
    ok = false;
    return false;
  }
  std::uint64_t fixed(std::size_t n) noexcept {
    if (!has(n)) return 0;
    std::uint64_t v = 0;
    std::memcpy(&v, p, n);  // little-endian
    p += n;
    return v;
  }
  std::uint64_t uleb() noexcept {
    std::uint64_t v = 0;
    for (int shift = 0; has(1); shift += 7) {
      const std::uint8_t b = *p++;
      if (shift < 64) v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return 0;
  }
  std::int64_t sleb() noexcept {
    std::uint64_t v = 0;
    int shift = 0;
    for (; has(1);) {
      const std::uint8_t b = *p++;
      if (shift < 64) v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) {
        if (shift < 64 && (b & 0x40)) v |= ~std::uint64_t{0} << shift;
        return static_cast<std::int64_t>(v);
      }
    }
    return 0;
  }
  void skip(std::size_t n) noexcept {
    if (has(n)) p += n;
  }
  // Skips a pointer in DW_EH_PE encoding `enc` (its format is all that decides the size).
  void skip_encoded(std::uint8_t enc) noexcept {
    if (enc == 0xff) return;  // DW_EH_PE_omit
    switch (enc & 0x0f) {
      case 0x00: skip(8); break;                   // absptr
      case 0x01: case 0x09: (void)uleb(); break;   // uleb128, sleb128
      case 0x02: case 0x0a: skip(2); break;        // (s)data2
      case 0x03: case 0x0b: skip(4); break;        // (s)data4
      case 0x04: case 0x0c: skip(8); break;        // (s)data8
      default: ok = false;
    }
  }
};

struct Cie {
  std::uint64_t code_align = 1;
  std::int64_t data_align = -8;
  std::uint64_t ra_column = 16;
  std::uint8_t fde_encoding = 0;
  bool has_z = false;
  bool signal = false;
  const std::uint8_t* insns = nullptr;
  const std::uint8_t* insns_end = nullptr;
};

// A register's rule, for the two registers the walk restores (rbp and the return address).
struct RegRule {
  enum How : std::uint8_t { Same, Undefined, Offset, Other } how = Same;
  std::int64_t off = 0;
};
struct Row {
  std::uint64_t cfa_reg = 7;  // DWARF 7 = rsp, 6 = rbp
  std::int64_t cfa_off = 8;
  bool cfa_expression = false;
  RegRule rbp, ra;
};

constexpr std::uint64_t kDwarfRbp = 6;
constexpr std::uint64_t kDwarfRsp = 7;

bool parse_cie(const std::uint8_t* at, Cie& cie) noexcept {
  Reader r{at, at + 4};
  const std::uint64_t length = r.fixed(4);
  if (!r.ok || length == 0 || length >= 0xfffffff0u) return false;  // 64-bit DWARF: not in .eh_frame
  r.end = at + 4 + length;
  if (r.fixed(4) != 0) return false;  // a CIE's id is 0 in .eh_frame
  const std::uint64_t version = r.fixed(1);
  if (version != 1 && version != 3) return false;
  const char* aug = reinterpret_cast<const char*>(r.p);
  while (r.has(1) && *r.p) ++r.p;
  r.skip(1);
  if (!r.ok || std::strstr(aug, "eh")) return false;
  cie.code_align = r.uleb();
  cie.data_align = r.sleb();
  cie.ra_column = version == 1 ? r.fixed(1) : r.uleb();
  if (aug[0] == 'z') {
    cie.has_z = true;
    const std::uint64_t n = r.uleb();
    if (!r.has(n)) return false;
    Reader data{r.p, r.p + n};
    for (const char* c = aug + 1; *c && data.ok; ++c) {
      switch (*c) {
        case 'R': cie.fde_encoding = static_cast<std::uint8_t>(data.fixed(1)); break;
        case 'L': data.skip(1); break;
        case 'P': data.skip_encoded(static_cast<std::uint8_t>(data.fixed(1))); break;
        case 'S': cie.signal = true; break;
        default: return false;
      }
    }
    if (!data.ok) return false;
    r.p += n;
  } else if (aug[0]) {
    return false;
  }
  cie.insns = r.p;
  cie.insns_end = r.end;
  return r.ok;
}

void set_reg(Row& row, std::uint64_t reg, std::uint64_t ra_column, RegRule rule) noexcept {
  if (reg == kDwarfRbp) row.rbp = rule;
  else if (reg == ra_column) row.ra = rule;  // other registers: the walk does not restore them
}

// Runs CFI instructions until the location passes `target`. false: an instruction outside the
// subset (the whole FDE is then the full unwinder's).
bool run_cfi(const std::uint8_t* p, const std::uint8_t* end, const Cie& cie, std::uintptr_t& loc,
             std::uintptr_t target, Row& row, const Row& initial) noexcept {
  constexpr int kMaxRemembered = 8;
  Row remembered[kMaxRemembered];
  int depth = 0;
  Reader r{p, end};
  const auto offset = [&](std::int64_t factored) { return RegRule{RegRule::Offset, factored * cie.data_align}; };
  while (r.ok && r.p < r.end) {
    const std::uint8_t op = static_cast<std::uint8_t>(r.fixed(1));
    std::uint64_t delta = 0;
    switch (op >> 6) {
      case 1: delta = op & 0x3f; break;  // DW_CFA_advance_loc
      case 2: set_reg(row, op & 0x3f, cie.ra_column, offset(static_cast<std::int64_t>(r.uleb()))); continue;
      case 3: {  // DW_CFA_restore
        const std::uint64_t reg = op & 0x3f;
        set_reg(row, reg, cie.ra_column, reg == kDwarfRbp ? initial.rbp : initial.ra);
        continue;
      }
      default: break;
    }
    if (op >> 6 == 0) {
      switch (op) {
        case 0x00: continue;                                // nop
        case 0x02: delta = r.fixed(1); break;               // advance_loc1
        case 0x03: delta = r.fixed(2); break;               // advance_loc2
        case 0x04: delta = r.fixed(4); break;               // advance_loc4
        case 0x05: {                                        // offset_extended
          const std::uint64_t reg = r.uleb();
          set_reg(row, reg, cie.ra_column, offset(static_cast<std::int64_t>(r.uleb())));
          continue;
        }
        case 0x06: {                                        // restore_extended
          const std::uint64_t reg = r.uleb();
          if (reg == kDwarfRbp) row.rbp = initial.rbp;
          else if (reg == cie.ra_column) row.ra = initial.ra;
          continue;
        }
        case 0x07: set_reg(row, r.uleb(), cie.ra_column, RegRule{RegRule::Undefined, 0}); continue;
        case 0x08: set_reg(row, r.uleb(), cie.ra_column, RegRule{RegRule::Same, 0}); continue;
        case 0x09: {                                        // register
          const std::uint64_t reg = r.uleb();
          (void)r.uleb();
          set_reg(row, reg, cie.ra_column, RegRule{RegRule::Other, 0});
          continue;
        }
        case 0x0a:                                          // remember_state
          if (depth == kMaxRemembered) return false;
          remembered[depth++] = row;
          continue;
        case 0x0b:                                          // restore_state
          if (depth == 0) return false;
          row = remembered[--depth];
          continue;
        case 0x0c:                                          // def_cfa
          row.cfa_reg = r.uleb();
          row.cfa_off = static_cast<std::int64_t>(r.uleb());
          row.cfa_expression = false;
          continue;
        case 0x0d: row.cfa_reg = r.uleb(); row.cfa_expression = false; continue;  // def_cfa_register
        case 0x0e: row.cfa_off = static_cast<std::int64_t>(r.uleb()); continue;    // def_cfa_offset
        case 0x0f: row.cfa_expression = true; r.skip(r.uleb()); continue;          // def_cfa_expression
        case 0x10: case 0x16: {                             // expression, val_expression
          const std::uint64_t reg = r.uleb();
          r.skip(r.uleb());
          set_reg(row, reg, cie.ra_column, RegRule{RegRule::Other, 0});
          continue;
        }
        case 0x11: {                                        // offset_extended_sf
          const std::uint64_t reg = r.uleb();
          set_reg(row, reg, cie.ra_column, offset(r.sleb()));
          continue;
        }
        case 0x12:                                          // def_cfa_sf
          row.cfa_reg = r.uleb();
          row.cfa_off = r.sleb() * cie.data_align;
          row.cfa_expression = false;
          continue;
        case 0x13: row.cfa_off = r.sleb() * cie.data_align; continue;  // def_cfa_offset_sf
        case 0x14: {                                        // val_offset
          const std::uint64_t reg = r.uleb();
          (void)r.uleb();
          set_reg(row, reg, cie.ra_column, RegRule{RegRule::Other, 0});
          continue;
        }
        case 0x15: {                                        // val_offset_sf
          const std::uint64_t reg = r.uleb();
          (void)r.sleb();
          set_reg(row, reg, cie.ra_column, RegRule{RegRule::Other, 0});
          continue;
        }
        case 0x2e: (void)r.uleb(); continue;                // GNU_args_size
        case 0x2f: {                                        // GNU_negative_offset_extended
          const std::uint64_t reg = r.uleb();
          set_reg(row, reg, cie.ra_column, offset(-static_cast<std::int64_t>(r.uleb())));
          continue;
        }
        default: return false;                              // set_loc and anything newer
      }
    }
    loc += delta * cie.code_align;
    if (loc > target) return r.ok;
  }
  return r.ok;
}

bool fits(std::int64_t v, std::int64_t lo, std::int64_t hi) noexcept { return v >= lo && v <= hi; }

// x86_64 Linux's rt_sigreturn trampoline (glibc's __restore_rt): mov $15, %rax; syscall.
bool is_sigreturn(const std::uint8_t* code) noexcept {
  static constexpr std::uint8_t kCode[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  return std::memcmp(code, kCode, sizeof kCode) == 0;
}

// Derives the rule for a frame whose code address is `ip` (a return address unless `exact`).
Rule derive_rule(std::uintptr_t ip, bool exact) noexcept {
  Rule unsupported{0, 0, 0, kUnsupported};
  const std::uintptr_t target = exact ? ip : ip - 1;
  DwarfEhBases bases{};
  const auto* fde = static_cast<const std::uint8_t*>(_Unwind_Find_FDE(reinterpret_cast<void*>(target), &bases));
  if (!fde || !bases.func) return unsupported;
  Reader r{fde, fde + 8};
  const std::uint64_t length = r.fixed(4);
  if (!r.ok || length < 4 || length >= 0xfffffff0u) return unsupported;
  const std::uint64_t cie_delta = r.fixed(4);
  r.end = fde + 4 + length;
  Cie cie;
  if (!parse_cie(fde + 4 - cie_delta, cie)) return unsupported;
  if (cie.signal) {
    // The handler's return address is the trampoline's first instruction.
    if (!exact && is_sigreturn(reinterpret_cast<const std::uint8_t*>(ip))) return Rule{0, 0, 0, kSignal};
    return unsupported;
  }
  r.skip_encoded(cie.fde_encoding);                                   // pc_begin (bases.func has it)
  r.skip_encoded(static_cast<std::uint8_t>(cie.fde_encoding & 0x0f));  // pc_range
  if (cie.has_z) r.skip(r.uleb());
  if (!r.ok) return unsupported;
  Row row;
  std::uintptr_t loc = reinterpret_cast<std::uintptr_t>(bases.func);
  if (!run_cfi(cie.insns, cie.insns_end, cie, loc, ~std::uintptr_t{0}, row, row)) return unsupported;
  const Row initial = row;
  loc = reinterpret_cast<std::uintptr_t>(bases.func);
  if (!run_cfi(r.p, r.end, cie, loc, target, row, initial)) return unsupported;
  if (row.ra.how == RegRule::Undefined) return Rule{0, 0, 0, kEnd};
  if (row.cfa_expression || (row.cfa_reg != kDwarfRsp && row.cfa_reg != kDwarfRbp)) return unsupported;
  if (row.ra.how != RegRule::Offset || row.ra.off != -8) return unsupported;
  if (!fits(row.cfa_off, 8, INT32_MAX) || row.cfa_off % 8) return unsupported;
  std::int64_t rbp_off = 0;
  if (row.rbp.how == RegRule::Offset && fits(row.rbp.off, INT16_MIN, -8) && row.rbp.off % 8 == 0)
    rbp_off = row.rbp.off;
  else if (row.rbp.how != RegRule::Same)
    return unsupported;
  return Rule{static_cast<std::int32_t>(row.cfa_off), static_cast<std::int16_t>(rbp_off), 0,
              row.cfa_reg == kDwarfRsp ? kRsp : kRbp};
}

// The rule of a frame, derived and stored (the walk looks the table up itself).
__attribute__((noinline)) Rule fill_rule(RuleSet& set, std::uintptr_t key, std::uintptr_t ip, bool exact) noexcept {
  if (t_filling) return derive_rule(ip, exact);  // a signal handler inside a fill: use, do not store
  t_filling = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  const Rule rule = derive_rule(ip, exact);
  set.way[1] = set.way[0];
  set.way[0].key = 0;  // never a key and a rule from two different fills
  std::atomic_signal_fence(std::memory_order_seq_cst);
  set.way[0].rule = rule;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  set.way[0].key = key;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_filling = false;
  return rule;
}

// The mapping of /proc/self/maps that holds `sp`, as [*lo, *hi). Async-signal-safe, since a
// thread's first walk may be in a signal handler (the fatal-signal handler captures where a
// callback crashed).
bool mapping_holding(std::uintptr_t sp, std::uintptr_t* lo, std::uintptr_t* hi) noexcept {
  struct Find {
    std::uintptr_t sp, lo, hi;
    bool found;
  } find{sp, 0, 0, false};
  for_each_mapping([](void* c, const Mapping& m) {
    auto& f = *static_cast<Find*>(c);
    if (m.start <= f.sp && f.sp < m.end) {
      f.lo = m.start;
      f.hi = m.end;
      f.found = true;
    }
    return !f.found;
  }, &find);
  *lo = find.lo;
  *hi = find.hi;
  return find.found;
}

// Whether `sp` lies on this thread's stack, and its top if so (0 if not or unknown). The bounds are
// found on the thread's first walk: the mapping that holds its stack pointer; for the main thread,
// whose mapping grows, from its top down by the stack's size limit (where nothing else is mapped,
// as pthread_getattr_np reckons it). A walk from elsewhere (an alternate signal stack, a
// coroutine's) is the full unwinder's.
std::uintptr_t stack_top(std::uintptr_t sp) noexcept {
  if (t_stack_state == 1) return sp >= t_stack_bottom && sp < t_stack_top ? t_stack_top : 0;
  if (t_stack_state == 2 || t_filling) return 0;
  t_filling = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::uintptr_t bottom = 0, top = 0;
  if (mapping_holding(sp, &bottom, &top) && ::getpid() == static_cast<pid_t>(::syscall(SYS_gettid))) {
    struct rlimit limit{};
    const std::uintptr_t size = ::getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
                                    ? static_cast<std::uintptr_t>(limit.rlim_cur)
                                    : std::uintptr_t{8} << 20;
    if (top - bottom < size) bottom = top - size;
  }
  t_stack_bottom = bottom;
  t_stack_top = top;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_stack_state = top ? 1 : 2;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_filling = false;
  return sp >= bottom && sp < top ? top : 0;
}

void drop_rules_if_modules_changed() noexcept {
  const std::uint64_t generation = modules_generation();
  if (t_rules_generation == generation) return;
  for (RuleSet& set : t_rules) set.way[0].key = set.way[1].key = 0;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_rules_generation = generation;
}

// A stack word the walk has checked to lie in [lo, hi). Not instrumented: the words are other
// frames' (an address sanitizer would call their spill slots out of bounds).
__attribute__((no_sanitize_address)) inline std::uintptr_t stack_word(std::uintptr_t addr) noexcept {
  return *reinterpret_cast<const std::uintptr_t*>(addr);
}

// The rule for `key` (an address, with kExact for an exact one), from `table` (this thread's: the
// walk takes its address once) or derived.
inline Rule lookup(RuleSet* table, std::uintptr_t key) noexcept {
  RuleSet& set = set_for(table, key);
  if (set.way[0].key == key) return set.way[0].rule;
  if (set.way[1].key == key) return set.way[1].rule;
  return fill_rule(set, key, key & ~kExact, (key & kExact) != 0);
}

// Every read lies in [lo, hi): the return address at CFA - 8 with rsp < CFA <= hi, both 8-aligned
// (so CFA - 8 >= rsp >= lo); a saved rbp below the CFA and at or above lo; a ucontext's registers
// between rsp and hi.
// With kLog, every stack word read is logged, in order, address and value (WalkLog).
template <bool kLog>
int walk(const void* frame, void** out, int max_depth, int skip, WalkLog* log) noexcept {
  const std::uintptr_t lo = reinterpret_cast<std::uintptr_t>(frame);
  const std::uintptr_t hi = stack_top(lo);
  if (!hi || (lo & 7) || hi - lo < 16) return -1;  // not on the thread's stack (an alternate signal stack, a coroutine's)
  drop_rules_if_modules_changed();
  RuleSet* const rules = t_rules;
  const auto read = [log](std::uintptr_t addr) noexcept {
    const std::uintptr_t value = stack_word(addr);
    if constexpr (kLog) {
      if (log->reads < kWalkLogReads) {
        log->read[log->reads] = {addr, value};
      }
      ++log->reads;
    }
    return value;
  };
  std::uintptr_t ip = read(lo + 8), rbp = read(lo), rsp = lo + 16;
  void** next = out;
  void** const end = out + max_depth;
  while (ip) {
    if (skip > 0) {
      --skip;
    } else {
      *next++ = reinterpret_cast<void*>(ip);
      if (next == end) break;
    }
    Rule rule = lookup(rules, ip);
    std::uintptr_t cfa;
    for (;;) {
      if (rule.kind == kRsp) {
        cfa = rsp + static_cast<std::uintptr_t>(rule.cfa_off);  // rsp and cfa_off are 8-aligned
        break;
      }
      if (rule.kind == kRbp) {
        cfa = rbp + static_cast<std::uintptr_t>(rule.cfa_off);
        if (cfa & 7) return -1;
        break;
      }
      if (rule.kind != kSignal) return rule.kind == kEnd ? static_cast<int>(next - out) : -1;
      // rsp is the kernel's ucontext (the trampoline's frame starts with it); the interrupted
      // frame's address is exact, and so is the lookup of its rule.
      constexpr std::size_t kRip = offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP]);
      constexpr std::size_t kRspAt = offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP]);
      constexpr std::size_t kRbpAt = offsetof(ucontext_t, uc_mcontext.gregs[REG_RBP]);
      static_assert(kRip % 8 == 0 && kRspAt % 8 == 0 && kRbpAt % 8 == 0, "aligned registers");
      constexpr std::size_t kEndAt = (kRip > kRspAt ? (kRip > kRbpAt ? kRip : kRbpAt) : (kRspAt > kRbpAt ? kRspAt : kRbpAt)) + 8;
      if (hi - rsp < kEndAt) return -1;
      const std::uintptr_t sp = read(rsp + kRspAt);
      if (sp <= rsp || sp >= hi || (sp & 7)) return -1;
      ip = read(rsp + kRip);
      rbp = read(rsp + kRbpAt);
      rsp = sp;
      if (!ip) return static_cast<int>(next - out);
      if (skip > 0) {
        --skip;
      } else {
        *next++ = reinterpret_cast<void*>(ip);
        if (next == end) return max_depth;
      }
      rule = lookup(rules, ip | kExact);
    }
    // rsp < cfa <= hi: frames lie strictly above each other (no loop, ever).
    if (cfa <= rsp || cfa > hi) return -1;
    if (rule.rbp_off) {
      const std::uintptr_t at = cfa + static_cast<std::uintptr_t>(static_cast<std::intptr_t>(rule.rbp_off));
      if (at < lo) return -1;
      rbp = read(at);
    }
    ip = read(cfa - 8);
    rsp = cfa;
  }
  return static_cast<int>(next - out);
}

}  // namespace

int fast_backtrace(const void* frame, void** out, int max_depth, int skip) noexcept {
  return walk<false>(frame, out, max_depth, skip, nullptr);
}

int fast_backtrace_logged(const void* frame, void** out, int max_depth, WalkLog* log) noexcept {
  log->reads = 0;
  return walk<true>(frame, out, max_depth, 0, log);
}

// Every address was read by a walk from a frame at or below the caller's, on this thread's stack,
// so it still lies in live frames of the stack (the caller's or further out).
// The differences are or-ed together, with no early exit: a check almost always finds the stack
// unchanged, and one branch at the end is cheaper than one a word.
bool stack_unchanged(const WalkLog& log) noexcept {
  std::uintptr_t differ = 0;
  const WalkLog::Read* r = log.read;
  const WalkLog::Read* const end = r + log.reads;
  for (; end - r >= 2; r += 2) differ |= (stack_word(r[0].addr) ^ r[0].value) | (stack_word(r[1].addr) ^ r[1].value);
  if (r != end) differ |= stack_word(r->addr) ^ r->value;
  return differ == 0;
}

}  // namespace attrcheck::detail

#endif  // ATTRCHECK_FAST_UNWIND
