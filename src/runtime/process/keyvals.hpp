// Keyvals as the runtime sees them (keyvals.cpp): the record of each engine keyval, shadow mode's
// map from the library's keyval numbers to the engine's, the predefined keyvals, and the
// quarantine of freed keyval numbers. Not a public header.
#pragma once

#include <atomic>
#include <cstdint>

#include "attrcheck/engine.hpp"
#include "runtime/process/state.hpp"

namespace attrcheck::rt {

// Shadow mode: what the library's create of a keyval was given. keyvals.cpp hands a held library
// key out again only to a create that would give the library the same.
struct LibraryArgs {
  const void* api;        // the wrapper (so the PMPI function and its binding)
  void* copy_fn;          // a trampoline, or the predefined function the user gave
  void* delete_fn;
  bool own_record;        // extra_state was the keyval's KeyRecord (C user callbacks)...
  std::uint64_t extra_state;  // ... else this, the user's
};

// What the tool knows about a user keyval: its callbacks, for the trampolines and for naming
// callbacks in findings (named lazily, only when a finding needs it: dladdr is slow).
// One per engine keyval slot; reused with the slot.
struct KeyRecord {
  std::atomic<int> engine_id{0};
  int user_id = 0;  // what the user holds (the library's id in shadow mode)
  ObjectKind kind = ObjectKind::Comm;
  void* copy_fn = nullptr;  // the user's functions (nullptr: predefined action)
  void* delete_fn = nullptr;
  std::uint64_t extra_state = 0;  // the pointer (C) or the integer (Fortran) the user gave
  Binding lang = Binding::C;      // the callbacks' language
  LibraryArgs library{};          // shadow mode
  // Shadow: the library may hold an attribute under this key on an object the tool never saw
  // made (a copy it made outside any hooked call, e.g. Open MPI's MPI_File_open dups the
  // communicator inside the library; or a predefined MPI_COMM_DUP_FN copy whose delete is the
  // user's, which no trampoline sees). Such a key is never handed out again (keyvals.cpp): the
  // library would run that copy's delete callback with this record, i.e. another keyval's.
  std::atomic<bool> unseen_copy{false};
};

KeyRecord* record_for(int engine_id) noexcept;            // nullptr if none
KeyRecord* new_record(int engine_id);
int to_engine_key_shadow(int user_key) noexcept;
inline int to_engine_key(int user_key) noexcept {  // shadow: the library's id mapped; emulate: identity
  return g_shadow ? to_engine_key_shadow(user_key) : user_key;
}
void map_key(int user_key, int engine_id) noexcept;
bool is_predefined_key_slow(int key) noexcept;
void register_predefined_keys(Engine& e);
// Shadow mode: a keyval the user freed, whose library free is held back for a while so that the
// library does not reissue its number at once (keyvals.cpp); all are released at MPI_Finalize.
// `engine_id`: the keyval the engine freed, with its slot kept (Engine::free_keyval keep_slot).
void quarantine_keyval(ObjectKind kind, int user_key, int engine_id) noexcept;
void release_quarantine() noexcept;
// Below MPI_THREAD_MULTIPLE, as MPI starts: the keyval map's and the quarantine's locks take
// nothing from then on, as the engine's (Engine::drop_locking).
void drop_keyval_locking() noexcept;
// A held library key whose quarantine is over, made with the same `args`, renewed for a new keyval
// (Engine::renew_keyval, in the slot whose KeyRecord the library already has): *user_key the
// library's number, *engine_id the new keyval. False: none (the caller creates one as usual).
bool reuse_held_keyval(const LibraryArgs& args, const KeyvalSpec& spec, Origin origin, int* user_key,
                       int* engine_id) noexcept;
extern const std::uint64_t g_predefined_small;  // bit k: key k (0..63) is predefined
extern const bool g_predefined_large;            // some predefined key is outside 0..63 (MPICH)
extern const int g_predefined_low, g_predefined_high;  // the range those span
inline bool is_predefined_key(int key) noexcept {
  if (key >= 0 && key < 64) return (g_predefined_small >> key) & 1;
  return g_predefined_large && key >= g_predefined_low && key <= g_predefined_high && is_predefined_key_slow(key);
}

}  // namespace attrcheck::rt
