// Randomized model-based test of attrcheck::Engine.
//
// A deliberately simple reference implementation of docs/engine.md (std::map / std::vector, no
// cleverness) and the engine are driven with the same random operations. User callbacks are test
// functions with the engine-native signatures (called by the default NativeInvoker); what they do
// (fail, throw, copy flag, value out, one nested engine call) is set per operation by a Script
// shared by both runs, and nested calls go to "the implementation under test" through a global
// pointer. After every step the results, outputs and the exact trace of callback calls, nested
// results and Observer events must agree; every kCheckEvery steps the whole visible state
// (attributes, objects, keyvals) is compared.
//
// Reproduce a failure with --gtest_filter='Seeds/EngineModel.*/<seed>' (with
// ATTRCHECK_MODEL_CHECK_EVERY=1 the state is compared after every step, to bisect a state
// difference): the message names the step and prints the last operations with their scripts.
//
// The harness (scripts, callbacks, trace) is in engine_model_harness.hpp, the reference model in
// engine_model_reference.hpp; this file generates the operations, drives both and compares.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attrcheck/engine.hpp"

#include "engine_model_reference.hpp"

namespace {

using namespace attrcheck;
using namespace engine_model;

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define MODEL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define MODEL_SANITIZED 1
#endif
#endif
#ifdef MODEL_SANITIZED
constexpr int kSeeds = 10, kOpsPerSeed = 10000;  // 100k operations
#else
constexpr int kSeeds = 40, kOpsPerSeed = 50000;  // 2M operations, a few seconds
#endif
constexpr int kCheckEvery = 1000;

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

enum class OpT : std::uint8_t {
  CreateKeyval, FreeKeyval, CreateObject, DupObject, FreeObject, SetAttr, GetAttr, DeleteAttr, Finalize
};
constexpr KeyvalId kWinKeyvals[3] = {8, 9, 10};

struct Op {
  OpT t = OpT::GetAttr;
  ObjectKind kind = ObjectKind::Comm;
  Handle h = 0, h2 = 0;
  KeyvalId kv = 0;
  Binding b = Binding::C;
  std::uint64_t value = 0;
  std::uint8_t flags = 0;
  KeyvalSpec spec;
  bool null_val = false, null_flag = false, want_trunc = false, world = false;
  std::array<Binding, 3> inst_repr{};  // create_object(Win): MPI_WIN_BASE etc. installed after it
  std::array<std::uint64_t, 3> inst_val{};
};

std::string describe(const Op& op) {
  const char* k = to_string(op.kind);
  const KeyvalSpec& s = op.spec;
  static const char* const copy_names[] = {"User", "NullCopy", "Dup"};
  const bool user_copy = s.copy.action == CopyAction::User, user_del = s.del.action == DeleteAction::User;
  switch (op.t) {
    case OpT::CreateKeyval:
      return fmt("create_keyval(kind=%s copy=%s%s%s del=%s%s%s lang=%s mpi1=%d extra=0x%" PRIx64 "%s)",
                 to_string(s.kind), copy_names[static_cast<int>(s.copy.action)], user_copy && !s.copy.fn ? "(null fn)" : "",
                 s.copy.deprecated ? "(mpi1 name)" : "", user_del ? "User" : "NullDelete",
                 user_del && !s.del.fn ? "(null fn)" : "", s.del.deprecated ? "(mpi1 name)" : "", to_string(s.lang), s.mpi1,
                 s.extra_state, op.null_val ? " keyval=nullptr" : "");
    case OpT::FreeKeyval: return fmt("free_keyval(%s, %s%d)", k, op.null_val ? "nullptr, was " : "", op.kv);
    case OpT::CreateObject:
      return fmt("create_object(%s, 0x%" PRIx64 ", flags=%d)%s", k, op.h, op.flags,
                 op.kind == ObjectKind::Win ? " + install_predefined(8,9,10)" : "");
    case OpT::DupObject: return fmt("dup_object(%s, 0x%" PRIx64 " -> 0x%" PRIx64 ")", k, op.h, op.h2);
    case OpT::FreeObject: return fmt("free_object(%s, 0x%" PRIx64 ")", k, op.h);
    case OpT::SetAttr:
      return fmt("set_attr(%s, 0x%" PRIx64 ", kv=%d, from=%s, value=0x%" PRIx64 ")", k, op.h, op.kv, to_string(op.b),
                 op.value);
    case OpT::GetAttr:
      return fmt("get_attr(%s, 0x%" PRIx64 ", kv=%d, as=%s%s%s%s)", k, op.h, op.kv, to_string(op.b),
                 op.null_val ? ", val=nullptr" : "", op.null_flag ? ", flag=nullptr" : "", op.want_trunc ? ", &truncated" : "");
    case OpT::DeleteAttr: return fmt("delete_attr(%s, 0x%" PRIx64 ", kv=%d)", k, op.h, op.kv);
    case OpT::Finalize: return fmt("finalize(delete_world_attributes=%d)", op.world);
  }
  return "?";
}

std::string describe(const Script& s) {
  std::string out = "script{";
  for (int i = 0; i < Script::kN; ++i) {
    if (s.rc_at(i)) out += fmt(" call#%d rc=%d", i, s.rc_at(i));
    if (s.throws_at(i)) out += fmt(" call#%d throws", i);
    if (s.flag_at(i) != 1) out += fmt(" call#%d flag=%d", i, s.flag_at(i));
  }
  const Nested& n = s.nested;
  if (n.op != NestedOp::None) {
    const std::string target = n.own_object ? "OWN object" : fmt("%s 0x%" PRIx64, to_string(n.kind), n.h);
    const std::string kv = n.own_keyval ? "OWN" : std::to_string(n.kv);
    out += fmt(" call#%d does %s(%s, kv=%s, %s, 0x%" PRIx64 ")", s.nested_at, kNestedNames[static_cast<int>(n.op)],
               target.c_str(), kv.c_str(), to_string(n.b), n.value);
  }
  if (s.identity) out += " identity";
  return out + " salt=" + hex(s.salt) + " }";
}

struct Outcome {
  Result r;
  KeyvalId id = 0;
  int flag = 0, width = 0;
  std::uint64_t val = 0;
  bool trunc = false, untouched = true;
  std::string note;
  std::vector<Ev> trace;
  std::vector<Hint> hints;
  std::vector<Result> installs;
  std::vector<FinalizeReport::Failure> failures;
};

// ---------------------------------------------------------------------------------------------
// The driver: generation, execution on both implementations, comparison
// ---------------------------------------------------------------------------------------------

class ModelRun {
 public:
  explicit ModelRun(int seed) : seed_(seed), rng_(0x5EEDull * static_cast<std::uint64_t>(seed) + 17) {
    static const KeyvalId invalids[] = {-1, -7, 0x24000000};
    cfg_.keyval_invalid = invalids[rnd(3)];
    const bool mpich = chance(50);  // int handles with non-zero nulls, or pointers with 0
    for (int k = 0; k < kObjectKinds; ++k) {
      const auto kk = static_cast<Handle>(k);
      const Handle base = mpich ? 0x44000000ull + 0x1000000ull * kk : 0x7f3a00000000ull + 0x100000ull * kk;
      cfg_.null_handle[k] = mpich ? 0x04000000ull + 0x8000000ull * kk : 0;
      pool_[k][0] = cfg_.null_handle[k];
      for (std::size_t i = 1; i < 16; ++i) pool_[k][i] = base + 0x40 * i;
    }
    // (Odd seeds without an observer: see g_observed.)
    g_observed = seed % 2 == 0;
    cfg_.observer = g_observed ? &observer_ : nullptr;
    engine_ = std::make_unique<Engine>(cfg_);
    eimpl_ = std::make_unique<EngineImpl>(engine_.get());
    if (chance(50)) engine_->drop_locking();  // as below MPI_THREAD_MULTIPLE: the same results
    memos_.clear();
    ref_ = std::make_unique<Reference>(cfg_);
    g = Ctx{};
    g.script = &kNoScript;
    g.trace = &g_sink;
  }
  ~ModelRun() { g = Ctx{}; }

  // Predefined keyvals (ids 0..10; 5..7 stay unregistered) and objects, on both implementations:
  // pool index 1 of Comm is MPI_COMM_WORLD, 2 MPI_COMM_SELF, index 1 of Type a predefined type.
  void setup() {
    struct Pre { ObjectKind kind; KeyvalId id; const char* name; bool copy; };
    static const Pre pre[] = {
        {ObjectKind::Comm, 0, "MPI_TAG_UB", true},      {ObjectKind::Comm, 1, "MPI_HOST", false},
        {ObjectKind::Comm, 2, "MPI_IO", true},          {ObjectKind::Comm, 3, "MPI_WTIME_IS_GLOBAL", false},
        {ObjectKind::Type, 4, "MODEL_TYPE_ATTR", true}, {ObjectKind::Win, 8, "MPI_WIN_BASE", false},
        {ObjectKind::Win, 9, "MPI_WIN_SIZE", false},    {ObjectKind::Win, 10, "MPI_WIN_DISP_UNIT", true}};
    for (const Pre& p : pre) {
      ASSERT_EQ(engine_->register_predefined_keyval(p.kind, p.id, p.name, p.copy), Result{}) << p.name;
      ref_->register_predefined_keyval(p.kind, p.id, p.name, p.copy);
    }
    for (Impl* impl : {static_cast<Impl*>(eimpl_.get()), static_cast<Impl*>(ref_.get())}) {
      ASSERT_EQ(impl->create_object(ObjectKind::Comm, pool_[0][1], kObjectPredefined | kObjectWorld), Result{});
      ASSERT_EQ(impl->create_object(ObjectKind::Comm, pool_[0][2], kObjectPredefined | kObjectSelf), Result{});
      ASSERT_EQ(impl->create_object(ObjectKind::Type, pool_[1][1], kObjectPredefined), Result{});
    }
    for (KeyvalId k : {0, 1, 2, 3, 4}) {
      const auto repr = static_cast<Binding>(rnd(3));
      const std::uint64_t v = pick_value(repr);
      const ObjectKind kind = k == 4 ? ObjectKind::Type : ObjectKind::Comm;
      ASSERT_EQ(engine_->install_predefined(kind, pool_[k == 4 ? 1 : 0][1], k, repr, v), Result{});
      ref_->install_predefined(kind, pool_[k == 4 ? 1 : 0][1], k, repr, v);
    }
    check_state();
  }

  void run(int nops, int finalize_at) {
    for (step_ = 0; step_ < nops; ++step_) {
      do_step(step_ == finalize_at);
      if (::testing::Test::HasFatalFailure()) return;
      if ((step_ + 1) % check_every_ == 0) check_state();
      if (::testing::Test::HasFatalFailure()) return;
    }
    check_state();
  }

 private:
  std::uint64_t rnd(std::uint64_t n) { return rng_() % n; }
  bool chance(int pct) { return rnd(100) < static_cast<std::uint64_t>(pct); }

  std::string where() const {
    std::string s = fmt("seed=%d step=%d (keyval_invalid=%d)\nlast operations, oldest first:\n", seed_, step_,
                        cfg_.keyval_invalid);
    for (const auto& [i, op, script] : recent_) s += fmt("  #%d ", i) + describe(op) + "  " + describe(script) + "\n";
    return s;
  }

  // --- generation (from the reference's state before the operation) ---
  ObjectKind pick_kind() {
    const std::uint64_t r = rnd(4);
    return r < 2 ? ObjectKind::Comm : r == 2 ? ObjectKind::Type : ObjectKind::Win;
  }
  Handle pick_object(ObjectKind kind) {
    const std::uint64_t r = rnd(100);
    if (r < 80) {
      std::vector<Handle> live;
      for (const auto& [k, o] : ref_->objects)
        if (k.first == static_cast<int>(kind)) live.push_back(k.second);
      if (!live.empty()) return live[rnd(live.size())];
    }
    if (r < 95) return pool_[static_cast<int>(kind)][rnd(16)];
    return pool_[rnd(3)][rnd(16)];  // possibly another kind's handle: unknown as this kind
  }
  KeyvalId pick_keyval(ObjectKind kind, Handle h) {
    const std::uint64_t r = rnd(100);
    const auto& live = ref_->live_ids;
    const auto& freed = ref_->freed_ids;
    if (r < 30) {  // one set on the object (possibly freed since, or predefined)
      const auto o = ref_->objects.find(key(kind, h));
      if (o != ref_->objects.end() && !o->second.attrs.empty()) return o->second.attrs[rnd(o->second.attrs.size())].keyval;
    }
    if (r < 70 || (r >= 86 && r < 94 && freed.empty())) {
      std::vector<KeyvalId> of_kind;
      for (KeyvalId id : live)
        if (ref_->keyvals.at(id).spec.kind == kind) of_kind.push_back(id);
      if (!of_kind.empty()) return of_kind[rnd(of_kind.size())];
    }
    if (r < 86 && !live.empty()) return live[rnd(live.size())];
    if (r < 94 && !freed.empty()) return freed[rnd(freed.size())];  // stale, maybe destroyed / slot reused
    if (r < 97) return static_cast<KeyvalId>(rnd(12));             // predefined (or unregistered 5..7, 11)
    if (r < 98) return cfg_.keyval_invalid;
    // Never created (at least not yet): small ids, negatives, ids near the engine's own.
    const KeyvalId known = live.empty() ? 65536 : live[rnd(live.size())];
    const KeyvalId choices[] = {12 + static_cast<KeyvalId>(rnd(40)), -2 - static_cast<KeyvalId>(rnd(100)), 0x7FFFFFFF,
                                known + 1, known + 65536, known ^ 0x40000000, known + 0x1000000};
    return choices[rnd(std::size(choices))];
  }
  std::uint64_t pick_value(Binding b) {
    static const std::uint64_t edges[] = {0x7FFFFFFFull,         0xFFFFFFFF80000000ull, 0x80000000ull, 0x100000000ull,
                                          0xFFFFFFFF7FFFFFFFull, 0x8000000000000000ull, 0xFFFFFFFFull, 0x1FFFFFFFFull};
    const std::uint64_t r = rnd(100);
    if (b == Binding::C || r < 15) return kPalette[rnd(kPaletteSize)];
    if (r < 50) return rnd(101) - 50;
    if (r < 75) return rng_();
    return edges[rnd(std::size(edges))];
  }
  KeyvalSpec make_spec() {
    KeyvalSpec s;
    s.kind = pick_kind();
    const std::uint64_t c = rnd(100), l = rnd(100);
    s.copy.action = c < 25 ? CopyAction::NullCopy : c < 50 ? CopyAction::Dup : CopyAction::User;
    if (s.copy.action == CopyAction::User && !chance(2)) s.copy.fn = reinterpret_cast<void*>(&test_copy);
    s.copy.deprecated = chance(25);
    s.del.action = chance(30) ? DeleteAction::NullDelete : DeleteAction::User;
    if (s.del.action == DeleteAction::User && !chance(2)) s.del.fn = reinterpret_cast<void*>(&test_delete);
    s.del.deprecated = chance(25);
    s.extra_state = chance(50) ? rng_() : rnd(1000);
    s.lang = l < 50 ? Binding::C : l < 80 ? Binding::FortranAint : Binding::FortranInt;
    s.mpi1 = s.kind == ObjectKind::Comm && chance(15);
    return s;
  }
  Op gen_op(bool finalize) {
    Op op;
    op.kind = pick_kind();
    if (finalize) {
      op.t = OpT::Finalize;
      op.world = chance(50);
      return op;
    }
    // Cumulative weights of create_keyval, free_keyval, create/dup/free_object, set/get/delete_attr;
    // every 4th seed churns keyvals (so that the engine reuses keyval slots with new generations).
    static const std::uint64_t normal[] = {5, 8, 20, 31, 40, 66, 88, 100}, churn[] = {20, 35, 45, 53, 60, 78, 92, 100};
    const std::uint64_t* cum = seed_ % 4 == 3 ? churn : normal;
    std::uint64_t w = rnd(100);
    if (w < cum[0] && ref_->live_ids.size() > 40 && chance(75)) w = cum[4];  // enough keyvals: set an attribute
    const Handle any = pool_[static_cast<int>(op.kind)][rnd(16)];
    if (w < cum[0]) {
      op.t = OpT::CreateKeyval;
      op.spec = make_spec();
      op.null_val = chance(2);
    } else if (w < cum[1]) {
      op.t = OpT::FreeKeyval;
      op.kv = pick_keyval(op.kind, 0);
      const auto it = ref_->keyvals.find(op.kv);
      if (it != ref_->keyvals.end() && chance(85)) op.kind = it->second.spec.kind;
      op.null_val = chance(3);
    } else if (w < cum[2]) {
      op.t = OpT::CreateObject;
      op.h = any;
      op.flags = op.h == pool_[static_cast<int>(op.kind)][3] ? kObjectPredefined : kObjectNone;  // one such slot
      for (std::size_t i = 0; i < 3; ++i) {
        op.inst_repr[i] = static_cast<Binding>(rnd(3));
        op.inst_val[i] = pick_value(op.inst_repr[i]);
      }
    } else if (w < cum[3]) {
      op.t = OpT::DupObject;
      op.h = pick_object(op.kind);
      op.h2 = any;
    } else if (w < cum[4]) {
      op.t = OpT::FreeObject;
      op.h = pick_object(op.kind);
    } else {
      op.t = w < cum[5] ? OpT::SetAttr : w < cum[6] ? OpT::GetAttr : OpT::DeleteAttr;
      op.h = pick_object(op.kind);
      op.kv = pick_keyval(op.kind, op.h);
      op.b = static_cast<Binding>(rnd(3));
      op.value = pick_value(op.b);
      op.null_val = chance(3);
      op.null_flag = chance(3);
      op.want_trunc = chance(70);
    }
    return op;
  }
  Script gen_script(const Op& op) {
    Script s;
    s.salt = rng_();
    for (int& f : s.flag) {
      const std::uint64_t r = rnd(100);
      f = r < 20 ? 0 : r < 92 ? 1 : 7;
    }
    // A dup whose C copy callbacks all copy what they are given, mostly with flag 1: the engine
    // copies the records as they are (its quick copy), repeatedly from the plan an object keeps.
    if (chance(25)) {
      s.identity = true;
      if (chance(80)) s.flag.fill(1);
    }
    auto idx = [&] { return static_cast<std::size_t>(std::min(rnd(5), rnd(5))); };  // early calls more often
    static const int rcs[] = {1, 42, -7, 1000};
    const std::uint64_t f = rnd(100);
    if (f < 12) s.rc[idx()] = rcs[rnd(4)];
    else if (f < 14) s.throws[idx()] = true;
    else if (f < 17) s.rc[idx()] = rcs[rnd(4)], s.rc[idx()] = rcs[rnd(4)];
    if (chance(30)) {
      Nested& n = s.nested;
      s.nested_at = static_cast<int>(idx());
      n.op = static_cast<NestedOp>(1 + rnd(5));
      n.own_object = chance(35);
      n.kind = pick_kind();
      n.h = pick_object(n.kind);
      // The object a dup is creating is off limits (its state mid-dup is not specified).
      if (op.t == OpT::DupObject && n.kind == op.kind && n.h == op.h2) n.own_object = true;
      n.own_keyval = chance(n.own_object ? 60 : 25);
      n.kv = pick_keyval(n.kind, n.h);
      n.b = n.op == NestedOp::Get ? (chance(50) ? Binding::FortranAint : Binding::FortranInt) : static_cast<Binding>(rnd(3));
      n.value = pick_value(n.b);
    }
    return s;
  }

  // --- execution ---
  Outcome exec(Impl& impl, bool reference, const Op& op, const Script& s, const Outcome* ro) {
    Outcome o;
    g.impl = &impl;
    g.script = &s;
    g.trace = &o.trace;
    g.reference = reference;
    g.calls = g.depth = g.pending_width = 0;
    g.hints.clear();
    g.ref_hints = ro ? &ro->hints : nullptr;
    switch (op.t) {
      case OpT::CreateKeyval:
        o.id = -12345;
        o.r = impl.create_keyval(op.spec, op.null_val ? nullptr : &o.id);
        break;
      case OpT::FreeKeyval:
        o.id = op.kv;
        o.r = impl.free_keyval(op.kind, op.null_val ? nullptr : &o.id);
        break;
      case OpT::CreateObject:
        o.r = impl.create_object(op.kind, op.h, op.flags);
        if (!o.r.ok() || op.kind != ObjectKind::Win) break;
        for (std::size_t i = 0; i < 3; ++i) {
          if (reference) ref_->install_predefined(op.kind, op.h, kWinKeyvals[i], op.inst_repr[i], op.inst_val[i]);
          o.installs.push_back(reference ? Result{} : engine_->install_predefined(op.kind, op.h, kWinKeyvals[i],
                                                                                    op.inst_repr[i], op.inst_val[i]));
        }
        break;
      case OpT::DupObject: o.r = impl.dup_object(op.kind, op.h, op.h2); break;
      case OpT::FreeObject: o.r = impl.free_object(op.kind, op.h); break;
      case OpT::SetAttr: o.r = impl.set_attr(op.kind, op.h, op.kv, op.b, op.value); break;
      case OpT::DeleteAttr: o.r = impl.delete_attr(op.kind, op.h, op.kv); break;
      case OpT::GetAttr: exec_get(impl, reference, op, ro, o); break;
      case OpT::Finalize: {
        FinalizeOptions fo;
        fo.delete_world_attributes = op.world;
        o.failures = impl.finalize(fo).failures;
        break;
      }
    }
    if (reference) o.hints = std::move(g.hints);
    g.impl = nullptr;
    g.script = &kNoScript;
    g.trace = &g_sink;
    return o;
  }
  void exec_get(Impl& impl, bool reference, const Op& op, const Outcome* ro, Outcome& o) {
    alignas(8) unsigned char buf[8];
    std::memset(buf, 0xA5, sizeof buf);
    int flag = -3;
    bool trunc = false;
    o.r = impl.get_attr(op.kind, op.h, op.kv, op.b, op.null_val ? nullptr : buf, op.null_flag ? nullptr : &flag,
                        op.want_trunc ? &trunc : nullptr);
    if (!o.r.ok()) return;
    o.flag = flag;
    o.trunc = trunc;
    if (flag == 0) {
      o.untouched = std::all_of(std::begin(buf), std::end(buf), [](unsigned char c) { return c == 0xA5; });
      return;
    }
    if (op.b != Binding::C) {
      o.val = load(buf, op.b == Binding::FortranInt ? 32 : 64);
      return;
    }
    // C: an address, or a pointer to the stored integer (compare what it points to).
    void* p;
    std::memcpy(&p, buf, sizeof p);
    o.val = word_of(p);
    const RefAttr* ra = reference ? ref_->find_attr(op.kind, op.h, op.kv) : nullptr;
    o.width = reference ? (ra ? width_of(ra->repr) : 0) : (ro ? ro->width : 0);
    if (o.width == 0) return;
    if (!reference) {  // make sure it is a pointer of that width before dereferencing it
      bool repr_ok = false;
      for (const AttributeInfo& a : engine_->attributes(op.kind, op.h))
        if (a.keyval == op.kv) repr_ok = width_of(a.repr) == o.width;
      if (!repr_ok) o.note = "engine's representation differs: C read not dereferenced";
      else if (!plausible_pointer(o.val, o.width)) o.note = "C read: address where a pointer was due";
      if (!o.note.empty()) return;
    }
    o.val = load(p, o.width);
  }

  static std::string diff(const Op& op, const Outcome& r, const Outcome& e) {
    std::string d;
    auto add = [&](const char* what, const std::string& rv, const std::string& ev) {
      d += std::string("  ") + what + ": reference=" + rv + " engine=" + ev + "\n";
    };
    auto num = [](auto v) { return std::to_string(v); };
    if (!same(r.r, e.r)) add("result", str(r.r), str(e.r));
    if (op.t == OpT::FreeKeyval && r.id != e.id) add("keyval afterwards", num(r.id), num(e.id));
    if (op.t == OpT::GetAttr && r.r.ok() && e.r.ok()) {
      if (r.flag != e.flag) add("flag", num(r.flag), num(e.flag));
      else if (r.flag == 0 && r.untouched != e.untouched) add("output untouched at flag=0", num(r.untouched), num(e.untouched));
      else if (r.flag != 0 && r.val != e.val) add(r.width ? "value (pointed to)" : "value", hex(r.val), hex(e.val));
      if (r.trunc != e.trunc) add("truncated", num(r.trunc), num(e.trunc));
    }
    if (r.note != e.note) add("note", r.note, e.note);
    if (r.installs.size() != e.installs.size() || !std::equal(r.installs.begin(), r.installs.end(), e.installs.begin(), same))
      add("install_predefined results", num(r.installs.size()), num(e.installs.size()));
    auto failures = [&](const std::vector<FinalizeReport::Failure>& fs) {
      std::string s;
      for (const auto& f : fs) s += fmt("%s:0x%" PRIx64 ":kv%d:", to_string(f.kind), f.object, f.keyval) + str(f.result) + " ";
      return s;
    };
    if (failures(r.failures) != failures(e.failures)) add("finalize failures", failures(r.failures), failures(e.failures));
    if (r.trace != e.trace) {
      std::size_t i = 0;
      while (i < r.trace.size() && i < e.trace.size() && r.trace[i] == e.trace[i]) ++i;
      d += "  trace differs at entry " + num(i) + "\n    reference trace:\n";
      for (std::size_t j = 0; j < r.trace.size() && j < 40; ++j) d += "      " + r.trace[j].text() + "\n";
      d += "    engine trace:\n";
      for (std::size_t j = 0; j < e.trace.size() && j < 40; ++j) d += "      " + e.trace[j].text() + "\n";
    }
    return d;
  }

  void do_step(bool finalize) {
    const Op op = gen_op(finalize);
    const Script s = gen_script(op);
    recent_.emplace_back(step_, op, s);
    if (recent_.size() > 10) recent_.pop_front();
    Outcome ro, eo;
    if (op.t == OpT::CreateKeyval) {  // the engine first: the reference takes over its id
      eo = exec(*eimpl_, false, op, s, nullptr);
      if (eo.r.ok()) {
        ASSERT_TRUE(eo.id > 0 && eo.id != cfg_.keyval_invalid && !ref_->keyvals.count(eo.id) &&
                    engine_->is_engine_keyval(eo.id))
            << where() << "create_keyval handed out id " << eo.id << ", which is not a fresh positive id";
        ref_->forced_id = eo.id;
        g.meta[eo.id] = {op.spec.kind, op.spec.lang};
      }
      ro = exec(*ref_, true, op, s, nullptr);
    } else {
      ro = exec(*ref_, true, op, s, nullptr);
      eo = exec(*eimpl_, false, op, s, &ro);
    }
    const std::string d = diff(op, ro, eo);
    ASSERT_TRUE(d.empty()) << where() << "divergence in " << describe(op) << ":\n" << d;
    check_versions(op);
  }

  // Engine::version() / layout_version() promise that a memoised get answer stays right while
  // they read the same (the runtime's query cache relies on it). After every step, the last few
  // distinct get queries are asked again: a query whose answer changed while version() did not,
  // or whose validity changed while layout_version() did not, fails the test at the step that
  // forgot to advance them.
  struct Query {
    ObjectKind kind;
    Handle h;
    KeyvalId kv;
    Binding b;
    bool operator==(const Query& o) const { return kind == o.kind && h == o.h && kv == o.kv && b == o.b; }
  };
  struct Answer {
    Result r;
    int flag = 0;
    std::uint64_t raw = 0;  // the output word as stored, not dereferenced
    bool trunc = false;
    bool operator==(const Answer& o) const { return r == o.r && flag == o.flag && raw == o.raw && trunc == o.trunc; }
  };
  struct Memo {
    Query q;
    std::uint64_t version, layout;
    Answer a;
  };
  std::deque<Memo> memos_;
  Answer ask(const Query& q) const {
    Answer a;
    std::uint64_t buf = 0x5A5A5A5A5A5A5A5AULL;
    a.r = engine_->get_attr(q.kind, q.h, q.kv, q.b, &buf, &a.flag, &a.trunc);
    a.raw = a.flag ? buf : 0;
    return a;
  }
  void check_versions(const Op& op) {
    if (engine_->finalized()) return;
    const std::uint64_t version = engine_->version(), layout = engine_->layout_version();
    ASSERT_EQ(version % 2, 0u) << where() << "version() odd between operations";
    ASSERT_NE(layout, 0u) << where();
    for (Memo& m : memos_) {
      ASSERT_LE(m.version, version) << where() << "version() went backwards";
      ASSERT_LE(m.layout, layout) << where() << "layout_version() went backwards";
      const Answer now = ask(m.q);
      if (m.layout == layout) {
        ASSERT_EQ(str(m.a.r), str(now.r)) << where() << "after " << describe(op)
                                          << ": a query's validity changed, layout_version() did not";
      }
      if (m.version == version) {
        ASSERT_TRUE(m.a == now) << where() << "after " << describe(op) << ": a get's answer changed, version() did not";
      }
      m = Memo{m.q, version, layout, now};
    }
    if (op.t != OpT::GetAttr) return;
    const Query q{op.kind, op.h, op.kv, op.b};
    if (std::any_of(memos_.begin(), memos_.end(), [&](const Memo& m) { return m.q == q; })) return;
    memos_.push_back(Memo{q, version, layout, ask(q)});
    if (memos_.size() > 8) memos_.pop_front();
  }

  // --- the whole visible state ---
  static std::string info_diff(KeyvalId id, const KeyvalInfo& e, const RefKeyval& r) {
    const KeyvalSpec &a = e.spec, &b = r.spec;
    std::string d;
    auto chk = [&](bool ok, const char* what) { d += ok ? "" : std::string(" ") + what; };
    chk(e.id == id && e.kind == r.spec.kind && e.predefined == r.predefined, "id/kind/predefined");
    if (r.predefined) chk(e.name == r.name, "name");
    if (!r.predefined) {
      chk(e.user_freed == r.user_freed && e.destroyed == r.destroyed && e.attributes == r.attributes, "state");
      chk(a.kind == b.kind && a.copy.action == b.copy.action && a.copy.fn == b.copy.fn &&
              a.copy.deprecated == b.copy.deprecated && a.del.action == b.del.action && a.del.fn == b.del.fn &&
              a.del.deprecated == b.del.deprecated && a.extra_state == b.extra_state && a.lang == b.lang &&
              a.mpi1 == b.mpi1,
          "spec");
    }
    if (d.empty()) return d;
    return fmt("keyval %d differs in%s (reference: user_freed=%d destroyed=%d attributes=%u; engine: id=%d "
               "user_freed=%d destroyed=%d attributes=%u)",
               id, d.c_str(), r.user_freed, r.destroyed, r.attributes, e.id, e.user_freed, e.destroyed, e.attributes);
  }

  void check_state() {
    ASSERT_EQ(engine_->finalized(), ref_->finalized) << where();
    (void)engine_->attribute_bytes();
    // Objects.
    const auto objs = engine_->objects();
    ASSERT_EQ(objs.size(), ref_->objects.size()) << where() << "number of live objects";
    for (const ObjectInfo& o : objs) {
      const auto it = ref_->objects.find(key(o.kind, o.handle));
      ASSERT_TRUE(it != ref_->objects.end() && o.flags == it->second.flags && o.attributes == it->second.attrs.size())
          << where() << fmt("engine's object %s 0x%" PRIx64 " (flags %d, %zu attributes) is not the reference's",
                            to_string(o.kind), o.handle, o.flags, o.attributes);
    }
    // Attributes, grouped per object, in set order.
    std::map<ObjKey, std::vector<AttributeInfo>> eng;
    for (const AttributeInfo& a : engine_->attributes()) eng[key(a.kind, a.object)].push_back(a);
    for (auto& [k, v] : eng)
      std::sort(v.begin(), v.end(), [](const AttributeInfo& x, const AttributeInfo& y) { return x.order < y.order; });
    for (const auto& [k, ro] : ref_->objects) {
      const std::vector<AttributeInfo>& ea = eng[k];
      auto text = [&, &k = k, &ro = ro] {
        std::string s = fmt("object %s 0x%" PRIx64 "\n  reference:", to_string(static_cast<ObjectKind>(k.first)), k.second);
        for (const RefAttr& a : ro.attrs)
          s += fmt(" kv%d/%s/0x%" PRIx64 "%s", a.keyval, to_string(a.repr), a.word, a.predefined ? "/pre" : "");
        s += "\n  engine:   ";
        for (const AttributeInfo& a : ea)
          s += fmt(" kv%d/%s/0x%" PRIx64 "%s", a.keyval, to_string(a.repr), a.value, a.predefined ? "/pre" : "");
        return s + "\n";
      };
      ASSERT_EQ(ro.attrs.size(), ea.size()) << where() << text();
      for (std::size_t i = 0; i < ea.size(); ++i) {
        const RefAttr& r = ro.attrs[i];
        const AttributeInfo& e = ea[i];
        ASSERT_TRUE(e.keyval == r.keyval && e.repr == r.repr && e.value == r.word && e.predefined == r.predefined &&
                    e.object_flags == ro.flags && (i == 0 || ea[i - 1].order < e.order) &&
                    (r.predefined || e.delete_action == ref_->keyvals.at(r.keyval).spec.del.action))
            << where() << "attribute #" << i << " differs (or its object flags / order / delete_action do)\n" << text();
      }
      if (ea.empty()) continue;
      const auto newest_last = engine_->attributes(static_cast<ObjectKind>(k.first), k.second);
      ASSERT_EQ(newest_last.size(), ea.size()) << where() << text();
      for (std::size_t i = 0; i < ea.size(); ++i) ASSERT_EQ(newest_last[i].keyval, ea[i].keyval) << where() << text();
    }
    ASSERT_EQ(eng.size(), ref_->objects.size()) << where() << "attributes() lists objects that are not live";
    // Keyvals: keyval_info of every id ever seen, is_engine_keyval, live_keyvals, leaked_keyvals.
    std::vector<KeyvalId> live_ref, leaked_ref, live_eng, leaked_eng;
    for (const auto& [id, r] : ref_->keyvals) {
      KeyvalInfo info;
      const bool found = engine_->keyval_info(id, &info);
      if (r.predefined || !r.destroyed) {
        ASSERT_TRUE(found) << where() << "keyval_info(" << id << ") returned false";
        const std::string d = info_diff(id, info, r);
        ASSERT_TRUE(d.empty()) << where() << d;
      } else if (found) {  // a destroyed keyval may be forgotten, but not misreported
        ASSERT_TRUE(info.id == id && info.destroyed && info.user_freed && info.attributes == 0)
            << where() << "destroyed " << info_diff(id, info, r);
      }
      ASSERT_EQ(engine_->is_engine_keyval(id), !r.predefined) << where() << "is_engine_keyval(" << id << ")";
      if (!r.predefined && !r.destroyed) live_ref.push_back(id);
      if (!r.predefined && !r.user_freed) leaked_ref.push_back(id);
    }
    for (KeyvalId id : {5, 6, 7, 11, 40, -99}) {
      KeyvalInfo info;
      if (ref_->keyvals.count(id) || id == cfg_.keyval_invalid) continue;
      ASSERT_FALSE(engine_->keyval_info(id, &info)) << where() << "keyval_info of never-created id " << id;
      ASSERT_FALSE(engine_->is_engine_keyval(id)) << where() << "is_engine_keyval of never-created id " << id;
    }
    for (const KeyvalInfo& i : engine_->live_keyvals()) {
      live_eng.push_back(i.id);
      const auto it = ref_->keyvals.find(i.id);
      ASSERT_TRUE(it != ref_->keyvals.end()) << where() << "live_keyvals() lists unknown id " << i.id;
      ASSERT_EQ(info_diff(i.id, i, it->second), "") << where() << "live_keyvals()";
    }
    for (const KeyvalInfo& i : engine_->leaked_keyvals()) leaked_eng.push_back(i.id);
    std::sort(live_eng.begin(), live_eng.end());
    std::sort(leaked_eng.begin(), leaked_eng.end());
    ASSERT_EQ(live_ref, live_eng) << where() << "live_keyvals() ids";
    ASSERT_EQ(leaked_ref, leaked_eng) << where() << "leaked_keyvals() ids";
  }

  int seed_;
  std::mt19937_64 rng_;
  EngineConfig cfg_;
  RecordingObserver observer_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EngineImpl> eimpl_;
  std::unique_ptr<Reference> ref_;
  Handle pool_[kObjectKinds][16] = {};
  int step_ = -1;
  std::deque<std::tuple<int, Op, Script>> recent_;
  const char* check_env_ = std::getenv("ATTRCHECK_MODEL_CHECK_EVERY");
  int check_every_ = check_env_ ? std::max(1, std::atoi(check_env_)) : kCheckEvery;
};

class EngineModel : public ::testing::TestWithParam<int> {};

TEST_P(EngineModel, RandomOperationsMatchReference) {
  const int seed = GetParam();
  ModelRun run(seed);
  run.setup();
  if (HasFatalFailure()) return;
  // Half of the runs finalize near the end; the remaining operations must all be refused.
  run.run(kOpsPerSeed, seed % 2 == 0 ? kOpsPerSeed - 300 : -1);
}

INSTANTIATE_TEST_SUITE_P(Seeds, EngineModel, ::testing::Range(0, kSeeds));

}  // namespace
