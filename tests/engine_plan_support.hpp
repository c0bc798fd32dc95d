// The engine plan tests' common set-up (engine_dup_plan_test, engine_run_plan_test): handles,
// copy and delete callbacks that log what they were given, and short ways to make a keyval and
// read an attribute or a keyval's count.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attrcheck/engine.hpp"

namespace plan_test {

using namespace attrcheck;

constexpr ObjectKind kComm = ObjectKind::Comm;
constexpr Handle kA = 0x1000, kB = 0x2000, kC = 0x3000, kD = 0x4000;

struct Log {
  std::vector<std::uint64_t> copied_in;  // the values the copy callbacks were given, in order
  std::vector<KeyvalId> deleted;         // the keys of the delete callbacks run, in order
  std::vector<std::uint64_t> deleted_values;  // and the values they were given
  bool bump = false;                     // the copy callback gives back its value + 1
};

inline int identity_copy(Handle, int, void* extra, void* in, void* out, int* flag) {
  auto* log = static_cast<Log*>(extra);
  const auto v = reinterpret_cast<std::uintptr_t>(in);
  log->copied_in.push_back(v);
  *static_cast<std::uint64_t*>(out) = log->bump ? v + 1 : v;
  *flag = 1;
  return 0;
}
inline int logging_delete(Handle, int key, void* value, void* extra) {
  static_cast<Log*>(extra)->deleted.push_back(key);
  static_cast<Log*>(extra)->deleted_values.push_back(reinterpret_cast<std::uintptr_t>(value));
  return 0;
}

inline KeyvalId make_key(Engine& e, Log* log, CopyAction copy = CopyAction::User, DeleteAction del = DeleteAction::User) {
  KeyvalSpec spec;
  spec.kind = kComm;
  spec.copy = CopyCallback{copy, copy == CopyAction::User ? reinterpret_cast<void*>(&identity_copy) : nullptr, false};
  spec.del = DeleteCallback{del, del == DeleteAction::User ? reinterpret_cast<void*>(&logging_delete) : nullptr, false};
  spec.extra_state = reinterpret_cast<std::uintptr_t>(log);
  KeyvalId k = -1;
  EXPECT_EQ(e.create_keyval(spec, &k).status, Status::Ok);
  return k;
}

inline std::uint64_t value_of(Engine& e, Handle h, KeyvalId k, int* flag) {
  std::uint64_t v = 0;
  *flag = -1;
  EXPECT_TRUE(e.get_attr(kComm, h, k, Binding::C, &v, flag).ok());
  return v;
}

inline std::uint32_t attributes_of(const Engine& e, KeyvalId k) {
  KeyvalInfo i;
  EXPECT_TRUE(e.keyval_info(k, &i));
  return i.attributes;
}

}  // namespace plan_test
