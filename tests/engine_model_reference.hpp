// The reference model of the engine's randomized test (engine_model_test.cpp): a deliberately
// simple implementation of docs/engine.md, rule by rule (std::map / std::vector, no cleverness).
#pragma once

#include "engine_model_harness.hpp"

namespace engine_model {

// ---------------------------------------------------------------------------------------------
// The reference model: docs/engine.md, rule by rule
// ---------------------------------------------------------------------------------------------

struct RefKeyval {
  KeyvalSpec spec;  // spec.kind is the keyval's kind (predefined ones too)
  bool predefined = false, copy_on_dup = false, user_freed = false, destroyed = false;
  std::string name;
  std::uint32_t attributes = 0;
};
struct RefAttr {
  KeyvalId keyval = 0;
  Binding repr = Binding::C;
  std::uint64_t word = 0;  // Fortran values sign-extended
  bool predefined = false;
  std::int64_t cell64 = 0;  // what a C read of a Fortran-set value points to
  std::int32_t cell32 = 0;
  void* c_read() {  // what a C read returns: the address, or a pointer to the integer
    if (repr == Binding::C) return ptr_of(word);
    return repr == Binding::FortranAint ? static_cast<void*>(&cell64) : static_cast<void*>(&cell32);
  }
};
struct RefObject {
  std::uint8_t flags = 0;
  std::vector<RefAttr> attrs;  // set order: oldest first
};

class Reference final : public Impl {
 public:
  explicit Reference(const EngineConfig& cfg) : cfg_(cfg) {}

  KeyvalId forced_id = 0;  // the id the engine handed out: the reference hands out the same
  std::map<KeyvalId, RefKeyval> keyvals;
  std::map<ObjKey, RefObject> objects;
  std::vector<KeyvalId> live_ids, freed_ids;  // user keyvals, for the generator
  bool finalized = false;

  RefAttr* find_attr(ObjectKind kind, Handle h, KeyvalId k) {
    auto o = objects.find(key(kind, h));
    if (o == objects.end()) return nullptr;
    for (RefAttr& a : o->second.attrs)
      if (a.keyval == k) return &a;
    return nullptr;
  }

  Result create_keyval(const KeyvalSpec& spec, KeyvalId* k) override {
    if (finalized) return res(Status::Finalized);
    if (!k || (spec.copy.action == CopyAction::User && !spec.copy.fn) ||
        (spec.del.action == DeleteAction::User && !spec.del.fn))
      return res(Status::NullArgument);
    keyvals[forced_id].spec = spec;
    live_ids.push_back(forced_id);
    *k = forced_id;
    return {};
  }
  Result free_keyval(ObjectKind kind, KeyvalId* k) override {
    if (finalized) return res(Status::Finalized);
    if (!k) return res(Status::NullArgument);
    if (*k == cfg_.keyval_invalid) return res(Status::KeyvalInvalid);
    auto it = keyvals.find(*k);
    if (it != keyvals.end() && it->second.predefined) return res(Status::KeyvalPredefined);
    if (it == keyvals.end()) return res(Status::KeyvalUnknown);
    RefKeyval& r = it->second;
    if (r.user_freed) return res(Status::KeyvalDoubleFree);
    if (r.spec.kind != kind) return res(Status::KeyvalKindMismatch);
    r.user_freed = true;
    r.destroyed = r.attributes == 0;
    live_ids.erase(std::find(live_ids.begin(), live_ids.end(), *k));
    freed_ids.push_back(*k);
    *k = cfg_.keyval_invalid;
    return {};
  }
  void register_predefined_keyval(ObjectKind kind, KeyvalId id, const char* name, bool copy) {
    RefKeyval& r = keyvals[id];
    r.spec.kind = kind;
    r.predefined = true;
    r.copy_on_dup = copy;
    r.name = name;
  }
  void install_predefined(ObjectKind kind, Handle h, KeyvalId k, Binding repr, std::uint64_t v) {
    add_attr(kind, h, k, repr, v, true);
  }
  Result create_object(ObjectKind kind, Handle h, std::uint8_t flags) override {
    if (finalized) return res(Status::Finalized);
    if (h == null_of(kind)) return res(Status::ObjectNull);
    if (objects.count(key(kind, h))) return res(Status::ObjectExists);
    objects[key(kind, h)].flags = flags;
    return {};
  }
  Result dup_object(ObjectKind kind, Handle old_h, Handle new_h) override {
    if (finalized) return res(Status::Finalized);
    if (Status s = check_object(kind, old_h); s != Status::Ok) return res(s);
    if (new_h == null_of(kind)) return res(Status::ObjectNull);
    if (objects.count(key(kind, new_h))) return res(Status::ObjectExists);
    objects[key(kind, new_h)].flags = kObjectNone;
    const std::vector<RefAttr> src = obj(kind, old_h).attrs;  // oldest first
    for (const RefAttr& a : src) {
      const RefKeyval kv = keyvals.at(a.keyval);
      if (a.predefined) {
        if (kv.copy_on_dup) add_attr(kind, new_h, a.keyval, a.repr, a.word, true);
      } else if (kv.spec.copy.action == CopyAction::Dup) {
        add_attr(kind, new_h, a.keyval, a.repr, a.word, false);
      } else if (kv.spec.copy.action == CopyAction::User) {
        int flag = 0;
        std::uint64_t out = 0;
        const Result r = call_copy(kind, old_h, a, kv, &flag, &out);
        if (!r.ok()) {
          rollback(kind, new_h);
          return r;
        }
        if (flag != 0) add_attr(kind, new_h, a.keyval, kv.spec.lang, out, false);
      }
    }
    return {};
  }
  Result free_object(ObjectKind kind, Handle h) override {
    if (finalized) return res(Status::Finalized);
    if (Status s = check_object(kind, h); s != Status::Ok) return res(s);
    if (obj(kind, h).flags & kObjectPredefined) return res(Status::ObjectPredefined);
    if (running(kind, h)) return res(Status::Reentrant);
    while (!obj(kind, h).attrs.empty()) {  // newest first; stop at a failure
      const RefAttr a = obj(kind, h).attrs.back();
      const Result r = call_delete(kind, h, a, CallbackCause::Free);
      if (!r.ok()) return r;
      obj(kind, h).attrs.pop_back();
      release(a.keyval);
    }
    objects.erase(key(kind, h));
    return {};
  }
  Result set_attr(ObjectKind kind, Handle h, KeyvalId k, Binding from, std::uint64_t v) override {
    if (Status s = check_modify(kind, h, k); s != Status::Ok) return res(s);
    if (const RefAttr* old = find_attr(kind, h, k)) {
      const Result r = call_delete(kind, h, *old, CallbackCause::Set);
      if (!r.ok()) return r;
      erase_attr(kind, h, k);
      --keyvals.at(k).attributes;  // replaced, not gone: a keyval freed meanwhile stays alive
    }
    add_attr(kind, h, k, from, v, false);
    return {};
  }
  Result get_attr(ObjectKind kind, Handle h, KeyvalId k, Binding as, void* val, int* flag, bool* trunc) override {
    if (finalized) return res(Status::Finalized);
    if (!val || !flag) return res(Status::NullArgument);
    if (Status s = check_object(kind, h); s != Status::Ok) return res(s);
    if (Status s = check_keyval(kind, k, false); s != Status::Ok) return res(s);
    RefAttr* a = find_attr(kind, h, k);
    *flag = a ? 1 : 0;
    if (!a) return {};
    if (as == Binding::C) {
      void* p = a->c_read();
      std::memcpy(val, &p, sizeof p);
    } else if (as == Binding::FortranAint) {
      std::memcpy(val, &a->word, sizeof a->word);
    } else {
      std::memcpy(val, &a->cell32, sizeof a->cell32);
      if (trunc) *trunc = sext32(a->word) != a->word;
    }
    return {};
  }
  Result delete_attr(ObjectKind kind, Handle h, KeyvalId k) override {
    if (Status s = check_modify(kind, h, k, /*for_delete=*/true); s != Status::Ok) return res(s);
    const RefAttr* a = find_attr(kind, h, k);
    if (!a) return res(Status::AttrAbsent);
    const Result r = call_delete(kind, h, *a, CallbackCause::Delete);
    if (!r.ok()) return r;
    erase_attr(kind, h, k);
    release(k);
    return {};
  }
  FinalizeReport finalize(const FinalizeOptions& options) override {
    FinalizeReport rep;
    std::vector<std::uint8_t> phases{kObjectSelf};
    if (options.delete_world_attributes) phases.push_back(kObjectWorld);
    for (const std::uint8_t phase : phases) {
      std::vector<ObjKey> targets;
      for (const auto& [k, o] : objects)
        if (o.flags & phase) targets.push_back(k);
      for (const ObjKey& t : targets) {
        const auto kind = static_cast<ObjectKind>(t.first);
        for (std::size_t i = objects.at(t).attrs.size(); i-- > 0;) {  // newest first, past failures
          const RefAttr a = objects.at(t).attrs[i];
          const Result r = call_delete(kind, t.second, a, CallbackCause::Finalize);
          if (!r.ok()) {
            rep.failures.push_back({kind, t.second, a.keyval, r});
            continue;
          }
          objects.at(t).attrs.erase(objects.at(t).attrs.begin() + static_cast<std::ptrdiff_t>(i));
          release(a.keyval);
        }
      }
    }
    finalized = true;
    return rep;
  }

 private:
  RefObject& obj(ObjectKind kind, Handle h) { return objects.at(key(kind, h)); }
  Handle null_of(ObjectKind kind) const { return cfg_.null_handle[static_cast<int>(kind)]; }
  Status check_object(ObjectKind kind, Handle h) const {
    if (h == null_of(kind)) return Status::ObjectNull;
    return objects.count(key(kind, h)) ? Status::Ok : Status::ObjectUnknown;
  }
  // `for_delete`: a key the user freed is still good for deleting the attributes that use it.
  Status check_keyval(ObjectKind kind, KeyvalId k, bool modify, bool for_delete = false) const {
    if (k == cfg_.keyval_invalid) return Status::KeyvalInvalid;
    auto it = keyvals.find(k);
    if (it == keyvals.end()) return Status::KeyvalUnknown;
    if (it->second.user_freed && !(for_delete && !it->second.destroyed)) return Status::KeyvalFreed;
    if (it->second.spec.kind != kind) return Status::KeyvalKindMismatch;
    if (modify && it->second.predefined) return Status::KeyvalPredefined;
    return Status::Ok;
  }
  Status check_modify(ObjectKind kind, Handle h, KeyvalId k, bool for_delete = false) const {  // set / delete
    if (finalized) return Status::Finalized;
    if (Status s = check_object(kind, h); s != Status::Ok) return s;
    if (Status s = check_keyval(kind, k, true, for_delete); s != Status::Ok) return s;
    return running(kind, h) ? Status::Reentrant : Status::Ok;
  }
  bool running(ObjectKind kind, Handle h) const {
    return std::find(running_.begin(), running_.end(), key(kind, h)) != running_.end();
  }
  void add_attr(ObjectKind kind, Handle h, KeyvalId k, Binding repr, std::uint64_t v, bool predefined) {
    RefAttr a;
    a.keyval = k;
    a.repr = repr;
    a.word = repr == Binding::FortranInt ? sext32(v) : v;
    a.predefined = predefined;
    a.cell64 = static_cast<std::int64_t>(a.word);
    a.cell32 = static_cast<std::int32_t>(static_cast<std::uint32_t>(a.word));
    obj(kind, h).attrs.push_back(a);
    ++keyvals.at(k).attributes;
  }
  void erase_attr(ObjectKind kind, Handle h, KeyvalId k) {
    auto& v = obj(kind, h).attrs;
    v.erase(std::find_if(v.begin(), v.end(), [&](const RefAttr& a) { return a.keyval == k; }));
  }
  void release(KeyvalId k) {
    RefKeyval& r = keyvals.at(k);
    --r.attributes;
    if (r.user_freed && r.attributes == 0) r.destroyed = true;
  }
  void rollback(ObjectKind kind, Handle h) {  // newest first, failures ignored
    while (!obj(kind, h).attrs.empty()) {
      const RefAttr a = obj(kind, h).attrs.back();
      call_delete(kind, h, a, CallbackCause::DupRollback);
      obj(kind, h).attrs.pop_back();
      release(a.keyval);
    }
    objects.erase(key(kind, h));
  }
  // The attribute value as a callback in `lang` receives it: a C callback of a Fortran-set value
  // gets a pointer to (a copy of) the integer. `a` must outlive the call.
  static void* arg(RefAttr& a, Binding lang) {
    if (lang == Binding::C) return a.c_read();
    return ptr_of(lang == Binding::FortranInt ? sext32(a.word) : a.word);
  }
  static Result outcome(int rc, bool threw) {
    return threw ? res(Status::CallbackThrew) : rc ? res(Status::CallbackFailed, rc) : Result{};
  }
  Result call_delete(ObjectKind kind, Handle h, const RefAttr& attr, CallbackCause cause) {
    RefAttr a = attr;
    const RefKeyval kv = keyvals.at(a.keyval);
    if (a.predefined || kv.spec.del.action != DeleteAction::User) return {};
    running_.push_back(key(kind, h));
    g.pending_width = kv.spec.lang == Binding::C ? width_of(a.repr) : 0;
    int rc = 0;
    bool threw = false;
    try {
      rc = reinterpret_cast<NativeDeleteFn>(kv.spec.del.fn)(h, a.keyval, arg(a, kv.spec.lang), ptr_of(kv.spec.extra_state));
    } catch (...) {
      threw = true;
    }
    running_.pop_back();
    record_event({CallbackEvent::Which::Delete, cause, kind, h, a.keyval, rc, 0, threw});
    return outcome(rc, threw);
  }
  Result call_copy(ObjectKind kind, Handle old_h, const RefAttr& attr, const RefKeyval& kv, int* flag, std::uint64_t* out) {
    RefAttr a = attr;
    running_.push_back(key(kind, old_h));
    g.pending_width = kv.spec.lang == Binding::C ? width_of(a.repr) : 0;
    int rc = 0;
    bool threw = false;
    try {
      rc = reinterpret_cast<NativeCopyFn>(kv.spec.copy.fn)(old_h, a.keyval, ptr_of(kv.spec.extra_state),
                                                           arg(a, kv.spec.lang), out, flag);
    } catch (...) {
      threw = true;
    }
    running_.pop_back();
    record_event({CallbackEvent::Which::Copy, CallbackCause::Dup, kind, old_h, a.keyval, rc, *flag, threw});
    return outcome(rc, threw);
  }

  EngineConfig cfg_;
  std::vector<ObjKey> running_;  // objects a callback is running for
};

}  // namespace engine_model
