// attrcheck cache engine: a complete, standard-conforming model of MPI attribute caching
// (MPI 4.x "Caching", the deprecated MPI-1 keyval API, and "Language Interoperability:
// Attributes"), with no dependency on MPI.
//
// The engine is used two ways by the runtime:
//   * shadow mode: every attribute call the application makes is mirrored here, and what the MPI
//     library answered is compared with what the engine answers;
//   * emulate mode: the engine *is* the attribute cache; the runtime serves the calls from it.
//
// Objects (communicators, datatypes, windows) are named by the bits of their MPI handle
// (`Handle`), which the host registers when it creates them. Keyvals are small positive ints that
// the engine hands out (user keyvals) or that the host registers (predefined keyvals).
//
// Every erroneous use is returned as a `Status`, never a crash: each Status maps to the MPI error
// class the standard prescribes (see error_class()). User callbacks are invoked through a
// `CallbackInvoker`, with no engine lock held, so they may call back into the engine.
//
// Thread safety: every member function may be called concurrently from any number of threads.
// get_attr() is lock-free (an optimistic read validated by a sequence counter); operations that
// modify state serialize on one mutex, which is never held while a user callback runs.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attrcheck {

// ---------------------------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------------------------

enum class ObjectKind : std::uint8_t { Comm = 0, Type = 1, Win = 2 };
inline constexpr int kObjectKinds = 3;
const char* to_string(ObjectKind kind) noexcept;

// The bits of an MPI handle (MPI_Comm is a pointer in Open MPI, an int in MPICH).
using Handle = std::uint64_t;

// A keyval as the user holds it.
using KeyvalId = int;
// The engine's user keyval ids are (generation << kKeyvalSlotBits) | slot: up to 2^21 - 1 keyvals
// live at once, each slot reused with a new generation (so a stale id is told from a live one).
inline constexpr int kKeyvalSlotBits = 21;
inline constexpr std::uint32_t keyval_slot(KeyvalId id) noexcept {
  return static_cast<std::uint32_t>(id) & ((1u << kKeyvalSlotBits) - 1);
}

// The language binding an attribute value is set from, read as, or a callback is written in.
// These are the three representations of "Language Interoperability: Attributes":
//   C            address-valued (void*): MPI_{Comm,Type,Win}_{set,get}_attr, MPI_Attr_put/get in C
//   FortranAint  INTEGER(KIND=MPI_ADDRESS_KIND): Fortran MPI_{COMM,TYPE,WIN}_{SET,GET}_ATTR
//   FortranInt   default INTEGER (32 bits): the deprecated Fortran MPI_ATTR_PUT / MPI_ATTR_GET
enum class Binding : std::uint8_t { C = 0, FortranAint = 1, FortranInt = 2 };
const char* to_string(Binding binding) noexcept;

// Where something happened: an id from a StackDepot (include/attrcheck/provenance.hpp), or 0
// when the host did not capture one. The engine only stores it.
using Origin = std::uint32_t;

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

enum class Status : std::uint8_t {
  Ok = 0,
  KeyvalInvalid,       // the host's MPI_KEYVAL_INVALID was passed
  KeyvalUnknown,       // a keyval that was never created
  KeyvalFreed,         // a keyval the user already freed (stale copy)
  KeyvalDoubleFree,    // free of a keyval that was already freed
  KeyvalKindMismatch,  // e.g. a datatype keyval used on a communicator
  KeyvalPredefined,    // a predefined keyval set, deleted or freed
  ObjectNull,          // MPI_COMM_NULL / MPI_DATATYPE_NULL / MPI_WIN_NULL
  ObjectUnknown,       // a handle the engine does not know (never created, or already freed)
  ObjectExists,        // create/dup with a handle that is already live
  ObjectPredefined,    // free of a predefined object (MPI_COMM_WORLD, MPI_COMM_SELF, ...)
  NullArgument,        // a null out-pointer or a null callback
  CallbackFailed,      // a copy/delete callback returned an error; Result::callback_rc has it
  CallbackThrew,       // a callback invoker threw; treated as a failed callback
  Reentrant,           // a callback modified (set/delete/free) the object it was called for
  AttrAbsent,          // delete of an attribute that is not set (see error_class())
  Finalized,           // a call after finalize() completed
  CapacityExhausted,   // the engine's tables are full (2^21 - 1 live keyvals, 2^22 objects)
};
const char* to_string(Status status) noexcept;

// The MPI error class a Status corresponds to, independent of any MPI library's numbering.
enum class ErrorClass : std::uint8_t { Success, Keyval, Arg, Comm, Type, Win, Callback, Other };
const char* to_string(ErrorClass cls) noexcept;
// `kind` decides which object class (Comm / Type / Win) object errors map to. AttrAbsent maps to
// Success: the standard does not make deleting an absent attribute erroneous (MPICH succeeds,
// Open MPI fails); the checker reports it as a portability warning instead.
ErrorClass error_class(Status status, ObjectKind kind) noexcept;

struct Result {
  Status status = Status::Ok;
  int callback_rc = 0;  // the callback's own return code when status == CallbackFailed
  bool ok() const noexcept { return status == Status::Ok; }
  friend bool operator==(Result a, Result b) noexcept {
    return a.status == b.status && a.callback_rc == b.callback_rc;
  }
  friend bool operator!=(Result a, Result b) noexcept { return !(a == b); }
};

// ---------------------------------------------------------------------------------------------
// Keyvals and callbacks
// ---------------------------------------------------------------------------------------------

// What a keyval's copy callback is. NullCopy and Dup are the predefined MPI_{COMM,TYPE,WIN}_
// NULL_COPY_FN / _DUP_FN (or, with `deprecated`, MPI-1's MPI_NULL_COPY_FN / MPI_DUP_FN); the
// engine performs them itself without calling anything.
enum class CopyAction : std::uint8_t { User = 0, NullCopy = 1, Dup = 2 };
enum class DeleteAction : std::uint8_t { User = 0, NullDelete = 1 };

struct CopyCallback {
  CopyAction action = CopyAction::NullCopy;
  void* fn = nullptr;       // the user's function when action == User (opaque to the engine)
  bool deprecated = false;  // MPI_NULL_COPY_FN / MPI_DUP_FN rather than the MPI-2 names
};
struct DeleteCallback {
  DeleteAction action = DeleteAction::NullDelete;
  void* fn = nullptr;
  bool deprecated = false;  // MPI_NULL_DELETE_FN
};

struct KeyvalSpec {
  ObjectKind kind = ObjectKind::Comm;
  CopyCallback copy;
  DeleteCallback del;
  std::uint64_t extra_state = 0;   // void* from C, INTEGER(KIND=MPI_ADDRESS_KIND) from Fortran
  Binding lang = Binding::C;       // the callbacks' language; FortranInt = MPI-1 Fortran
  bool mpi1 = false;               // created by the deprecated MPI_Keyval_create
};

// Why a callback runs.
enum class CallbackCause : std::uint8_t { Dup, Free, Set, Delete, Finalize, DupRollback };
const char* to_string(CallbackCause cause) noexcept;

// A copy callback invocation. value_in is already in the callback's language (see Binding):
// for a C callback, a Fortran-set attribute arrives as a pointer to the stored integer.
struct CopyCall {
  ObjectKind kind;
  Handle old_object;
  KeyvalId keyval;
  Binding lang;
  void* fn;
  std::uint64_t extra_state;
  std::uint64_t value_in;
};

// A delete callback invocation; `value` is in the callback's language, as for CopyCall.
struct DeleteCall {
  ObjectKind kind;
  Handle object;
  KeyvalId keyval;
  Binding lang;
  void* fn;
  std::uint64_t extra_state;
  std::uint64_t value;
  CallbackCause cause;
  Binding repr;  // how the value was set (a C callback gets a Fortran-set value as an address)
};

// A delete callback call made outside the engine (Engine::set_attr_ran): the object and keyval it
// was called for, the value it was passed (in the callback's language, as DeleteCall::value) and
// what it returned.
// (keyval and rc side by side, so a check reads them as one word against {keyval, MPI_SUCCESS};
// the constructor keeps the order object, keyval, value, rc in which runs are written.)
struct RanDelete {
  RanDelete() = default;
  constexpr RanDelete(Handle object_, KeyvalId keyval_, std::uint64_t value_, int rc_) noexcept
      : object(object_), keyval(keyval_), rc(rc_), value(value_) {}
  Handle object;
  KeyvalId keyval;
  int rc;
  std::uint64_t value;
};

// A copy callback call made outside the engine (Engine::dup_object_ran), for the object being
// duplicated: the keyval, the value it was passed (in the callback's language, as
// CopyCall::value_in), what it returned, the flag it set and the value it produced.
struct RanCopy {
  KeyvalId keyval;
  int rc;
  int flag;
  std::uint64_t value_in;
  std::uint64_t value_out;
};

// set_attr's checks of an object and keyval, remembered (Engine::find_set_cursor). Opaque.
struct SetCursor {
  std::uint64_t layout = 0;       // the layout_version() it holds at
  const void* object = nullptr;   // the engine's record of the object (nullptr: no cursor)
  const void* keyval = nullptr;   // and of the keyval
};

// What a set or delete through a cursor did (Engine::set_attr_at, delete_attr_at): its result,
// and version() right after it. (One out-parameter: set_attr_at's arguments all fit in
// registers, so Engine's forwarder to its implementation is a jump.)
struct AtOutcome {
  Result result;
  std::uint64_t version = 0;
};

// How the engine calls user callbacks. The runtime installs one that calls C or Fortran
// functions with real MPI handles; the default (NativeInvoker) calls engine-native C functions.
// A copy callback writes its new value and flag; for a C callback *value_out is the address word,
// for Fortran callbacks the integer (the engine stores it with the callback's Binding).
// What one copy callback of a run did (CallbackInvoker::copy_run): what copy() returned, the
// value and flag it wrote, and whether it threw.
struct CopyOutcome {
  std::uint64_t value = 0;
  int flag = 0;
  int rc = 0;
  bool threw = false;
};

class CallbackInvoker {
 public:
  virtual ~CallbackInvoker() = default;
  virtual int copy(const CopyCall& call, std::uint64_t* value_out, int* flag) = 0;
  virtual int del(const DeleteCall& call) = 0;
  // The copy callbacks of one dup (one kind and old object), in order: runs each as copy() would,
  // its outcome into out[i], and stops after the first that fails (returns nonzero or throws).
  // Returns how many ran, and in *as_given whether all n ran and each succeeded and gave back the
  // value it was given with flag 1 (as MPI_COMM_DUP_FN does: the engine then copies the records
  // as they are without reading the outcomes). This one calls copy() for each; an invoker may run
  // them all under one frame of its own (nothing else runs between them).
  virtual std::size_t copy_run(const CopyCall* calls, std::size_t n, CopyOutcome* out, bool* as_given);
  // The delete callbacks of one free (one kind and object), in order: runs *first as del()
  // would, then next(ctx, rc, threw), which answers the next call, or nullptr (done). Every call
  // of a run is for the first call's kind, object and cause (the calls next answers may leave
  // those fields as they are: they are not read). This one calls del() for each; an invoker may
  // run them all under one frame of its own (between two of them only next() runs, which calls
  // no user code).
  using DeleteNext = const DeleteCall* (*)(void* ctx, int rc, bool threw);
  virtual void del_run(const DeleteCall* first, DeleteNext next, void* ctx);
};

// Engine-native C callback signatures, used by NativeInvoker: MPI's C signatures with the
// object handle as a Handle.
using NativeCopyFn = int (*)(Handle old_object, int keyval, void* extra_state,
                             void* attribute_val_in, void* attribute_val_out, int* flag);
using NativeDeleteFn = int (*)(Handle object, int keyval, void* attribute_val, void* extra_state);

class NativeInvoker final : public CallbackInvoker {
 public:
  int copy(const CopyCall& call, std::uint64_t* value_out, int* flag) override;
  int del(const DeleteCall& call) override;
};

// Told about every callback the engine runs (for the shadow cross-check and diagnostics).
// Called on the thread that ran the callback, after it returned, with no engine lock held.
struct CallbackEvent {
  enum class Which : std::uint8_t { Copy, Delete } which;
  CallbackCause cause;
  ObjectKind kind;
  Handle object;       // the object the callback was called for (the old one for copies)
  KeyvalId keyval;
  int rc;              // what it returned
  int flag;            // copy callbacks: the raw flag it set (anything but 0/1 is suspicious)
  bool threw;          // the invoker threw
};
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_callback(const CallbackEvent& event) = 0;
};

// ---------------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------------

enum ObjectFlags : std::uint8_t {
  kObjectNone = 0,
  kObjectPredefined = 1,  // cannot be freed by the user (MPI_COMM_WORLD, MPI_INT, ...)
  kObjectSelf = 2,        // MPI_COMM_SELF: its attributes are deleted first at finalize
  kObjectWorld = 4,       // MPI_COMM_WORLD
};

struct EngineConfig {
  KeyvalId keyval_invalid = -1;          // the host's MPI_KEYVAL_INVALID
  Handle null_handle[kObjectKinds] = {0, 0, 0};  // MPI_COMM_NULL, MPI_DATATYPE_NULL, MPI_WIN_NULL
  CallbackInvoker* invoker = nullptr;    // nullptr: a NativeInvoker owned by the engine
  Observer* observer = nullptr;          // optional
  // Lower capacities than the engine's own (0: its own, 2^21 - 1 keyvals and 2^22 objects), so
  // that what happens at a capacity can be tested without creating millions of anything.
  std::uint32_t max_keyvals = 0;  // keyval slots (live keyvals, and freed ones not yet reused)
  std::uint32_t max_objects = 0;  // live objects
};

struct FinalizeOptions {
  // Also delete the attributes of MPI_COMM_WORLD after those of MPI_COMM_SELF. The standard only
  // requires MPI_COMM_SELF; Open MPI 4.1 and MPICH also do MPI_COMM_WORLD, Open MPI 5 does not.
  bool delete_world_attributes = false;
  // Called once MPI_COMM_SELF's attributes are deleted, before MPI_COMM_WORLD's, without the
  // engine's lock (it may ask the engine what is still set): the host's look at what the
  // program's MPI_COMM_SELF callbacks left behind.
  void (*after_self)(void* context) = nullptr;
  void* context = nullptr;
  // The steps to take: both (one call), or MPI_COMM_SELF's (with after_self) in one call and
  // MPI_COMM_WORLD's in a later one, for a host that must act between them (the library's own
  // finalize deletes MPI_COMM_SELF's attributes while MPI still works, MPI_COMM_WORLD's later).
  // The engine counts as finalized once the MPI_COMM_WORLD step is done.
  bool self_step = true;
  bool world_step = true;
};

// What finalize() did: every delete callback that failed (the attribute stays, as a leak).
struct FinalizeReport {
  struct Failure {
    ObjectKind kind;
    Handle object;
    KeyvalId keyval;
    Result result;
  };
  std::vector<Failure> failures;
};

// ---------------------------------------------------------------------------------------------
// Introspection (diagnostics, leak enumeration, tests); all return copies.
// ---------------------------------------------------------------------------------------------

struct KeyvalInfo {
  KeyvalId id = 0;
  ObjectKind kind = ObjectKind::Comm;
  bool predefined = false;
  bool user_freed = false;        // the user freed it (it may still be alive through attributes)
  bool destroyed = false;         // no attribute uses it any more and it was freed
  std::uint32_t attributes = 0;   // attributes currently using it
  KeyvalSpec spec;
  Origin created_at = 0;
  Origin freed_at = 0;            // the (first) free
  std::string name;               // predefined keyvals: e.g. "MPI_TAG_UB"
};

struct AttributeInfo {
  ObjectKind kind;
  Handle object;
  KeyvalId keyval;
  Binding repr;                   // how it was set
  std::uint64_t value;            // the word as set (Fortran values sign-extended to 64 bits)
  std::uint64_t order;            // set order on its object: larger = set more recently
  bool predefined;                // a host-supplied predefined attribute
  Origin set_at;
  Origin object_created_at;
  std::uint8_t object_flags;
  DeleteAction delete_action;
};

struct ObjectInfo {
  ObjectKind kind;
  Handle handle;
  std::uint8_t flags;
  Origin created_at;
  std::size_t attributes;
};

// ---------------------------------------------------------------------------------------------
// The engine
// ---------------------------------------------------------------------------------------------

class Engine {
 public:
  explicit Engine(const EngineConfig& config = EngineConfig{});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // --- keyvals ---
  // Creates a user keyval. NullArgument if `keyval` is null, or a User action has a null fn.
  Result create_keyval(const KeyvalSpec& spec, KeyvalId* keyval, Origin origin = 0);
  // Frees a keyval: *keyval becomes the configured MPI_KEYVAL_INVALID. The key lives on while
  // attributes use it. `kind` is the kind of the free call (MPI_Keyval_free = Comm).
  // `keep_slot`: the keyval's slot is not reused for another keyval until renew_keyval or
  // release_keyval_slot names it (a host that keeps its own handle for the keyval, to hand out
  // again, keeps the slot, and so whatever it keyed by the slot; attrcheck's shadow mode).
  // Honoured while the kept slots are fewer than a quarter of the keyval capacity.
  Result free_keyval(ObjectKind kind, KeyvalId* keyval, Origin origin = 0, bool keep_slot = false);
  // Creates a user keyval in the slot of `old_id`, freed with keep_slot and destroyed since (no
  // attribute uses it any more): like create_keyval, but *keyval is always in that slot (the next
  // generation). KeyvalFreed: old_id's keyval is still alive through attributes; KeyvalUnknown:
  // old_id is not a kept slot's keyval; CapacityExhausted: the slot's generations are used up.
  // On failure the slot stays kept.
  Result renew_keyval(KeyvalId old_id, const KeyvalSpec& spec, KeyvalId* keyval, Origin origin = 0);
  // Gives up a slot kept by free_keyval: reused like any other once its keyval is destroyed.
  void release_keyval_slot(KeyvalId old_id);
  // Registers a predefined keyval (MPI_TAG_UB, MPI_WIN_BASE, ...) with the host's id. Its values
  // are supplied per object with install_predefined(); users cannot set, delete or free it.
  // `copy_on_dup`: whether dups of an object carry its value along (Open MPI does for comms).
  Result register_predefined_keyval(ObjectKind kind, KeyvalId id, const char* name,
                                    bool copy_on_dup = true);

  // --- objects ---
  // Registers an object the host created (MPI_Init's predefined objects, constructors).
  Result create_object(ObjectKind kind, Handle handle, std::uint8_t flags = kObjectNone,
                       Origin origin = 0);
  // Registers `new_handle` as a duplicate of `old_handle` and runs the copy callbacks. On a
  // failing copy callback, the copies already made are deleted (their delete callbacks run),
  // `new_handle` is unregistered and the callback's result is returned.
  Result dup_object(ObjectKind kind, Handle old_handle, Handle new_handle, Origin origin = 0);
  // Runs the delete callbacks, newest set first. If one fails the free stops and fails: the
  // object stays registered with the attributes not yet deleted.
  Result free_object(ObjectKind kind, Handle handle, Origin origin = 0);
  // dup_object and free_object for a host that keeps attributes in another cache too and mirrors
  // each dup and free it made there (the runtime's shadow mode): that cache has already run the
  // callbacks, as `ran` (n entries, in any order) describes. They take only the plain case and
  // call nothing: no callback of this thread runs for the object and no thread is changing it;
  // every attribute involved holds a C value and its keyval has C callbacks; and exactly the
  // callbacks the standard requires ran, each once, with the attribute's value, and succeeded
  // (a copy's flag 0 or 1). Then they do what dup_object / free_object would have done and
  // return true (a dup keeps the attributes' set order); else they return false with nothing
  // changed, and the host calls dup_object / free_object, whose invoker can answer from what ran.
  // The dup also answers false when `new_handle` is already registered.
  bool dup_object_ran(ObjectKind kind, Handle old_handle, Handle new_handle, const RanCopy* ran, std::size_t n,
                      Origin origin = 0);
  bool free_object_ran(ObjectKind kind, Handle handle, const RanDelete* ran, std::size_t n);
  // Unregisters an object without running any callback (the host learnt that the object is gone,
  // e.g. the MPI library freed it on a path the host does not intercept). Its attributes are
  // dropped and stop holding their keyvals.
  Result forget_object(ObjectKind kind, Handle handle);

  // --- attributes ---
  // Sets an attribute. `value` is the word as set: an address from C, or the Fortran integer
  // (FortranInt values are sign-extended from their low 32 bits). Replacing a value first runs
  // the delete callback on the old one; if it fails, the set fails and the old value stays.
  Result set_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Binding from,
                  std::uint64_t value, Origin origin = 0);
  // set_attr for a host that mirrors a set it already made in another cache (the runtime's
  // shadow mode), whose checks it made when the call began: the call's own callback (the replaced
  // value's delete callback) may since have freed the keyval, which stays valid for the attribute
  // the set replaces (MPI_COMM_FREE_KEYVAL: freeing a key in use is not erroneous, the actual
  // free waits for its last attribute). Such a keyval is taken as set_attr takes a live one; a
  // freed keyval with no attribute on the object is still refused (nothing in the call could have
  // freed it).
  Result set_attr_entered(ObjectKind kind, Handle handle, KeyvalId keyval, Binding from, std::uint64_t value,
                          Origin origin = 0);
  // For a host that keeps attributes in another cache too, and mirrors each set it made there
  // (the runtime's shadow mode): that cache has already run the old value's delete callback, as
  // `ran` describes (nullptr: it ran none). When that is exactly the call the standard requires
  // here (same object, keyval and value) and it succeeded, and set_attr would succeed, applies the
  // set as set_attr would, without calling anything, and returns true; *version (if given) is
  // then version() just after the change. Otherwise returns false and changes nothing, and the
  // host calls set_attr, whose invoker can answer from what ran. Never waits for other threads.
  // The cursor (find_set_cursor) names the object and keyval.
  bool set_attr_ran(const SetCursor& cursor, Binding from, std::uint64_t value, Origin origin,
                    const RanDelete* ran, std::uint64_t* version = nullptr);
  // set_attr_ran for a host that ran the replaced value's delete callback itself (`ran`), in
  // which user code may have changed the layout (freed the keyval, say): the cursor then still
  // serves while its object and keyval are the ones `ran` names and the attribute is there with
  // the value the callback was passed. False: nothing changed.
  bool set_attr_after_delete(const SetCursor& cursor, Binding from, std::uint64_t value, Origin origin,
                             const RanDelete& ran, std::uint64_t* version = nullptr);
  // The delete function of the cursor's keyval and its extra_state, if it is a C user function
  // (false otherwise). For a host that runs it itself; the cursor must hold (find_set_cursor).
  bool c_delete_function(const SetCursor& cursor, void** fn, std::uint64_t* extra_state) const;
  // delete_attr for a delete the library made, whose delete callback (if the keyval has a user
  // one: `ran`, else nullptr) already ran elsewhere; `cursor` from find_set_cursor for the same
  // object and keyval. Like set_attr_ran, it only takes the plain case: the cursor still holds,
  // no callbacks are running for the object, the attribute is there, and exactly the delete
  // callback the standard requires ran, with the attribute's value, and succeeded. False: nothing
  // changed (call delete_attr). *version (if given): version() right after the delete.
  bool delete_attr_ran(const SetCursor& cursor, const RanDelete* ran, std::uint64_t* version = nullptr);
  // set_attr and delete_attr for a host that remembers the checks of a query (the runtime's
  // emulate mode): the cursor (find_set_cursor) stands for the lookups of the object and keyval
  // while the layout reads the same. The rest is as set_attr / delete_attr, callbacks included:
  // out->result is their result, out->version version() right after. False, with nothing
  // changed, when the cursor no longer holds, a callback of this thread runs for the object,
  // another thread is changing it, or (delete) the attribute is absent: then call set_attr /
  // delete_attr.
  bool set_attr_at(const SetCursor& cursor, Binding from, std::uint64_t value, Origin origin, AtOutcome* out);
  bool delete_attr_at(const SetCursor& cursor, AtOutcome* out);
  // The object and keyval a set of (kind, handle, keyval) would use, for set_attr_ran; false when
  // set_attr would refuse the call (unknown or null object, invalid, freed or predefined keyval,
  // a keyval of another kind, finalized). `layout`: a layout_version() read before this call; the
  // cursor holds while layout_version() still reads it, and set_attr_ran refuses it after.
  // *user_delete (if given): whether the keyval's delete callback is a user function (replacing
  // a value then runs it).
  bool find_set_cursor(ObjectKind kind, Handle handle, KeyvalId keyval, std::uint64_t layout,
                       SetCursor* out, bool* user_delete = nullptr) const;
  // Reads an attribute as `as` expects it (the interoperability table):
  //   as C           writes a void* to *(void**)attribute_val
  //   as FortranAint writes an int64 to *(int64_t*)attribute_val
  //   as FortranInt  writes an int32 to *(int32_t*)attribute_val
  // *flag = 1 if set, 0 if not (then attribute_val is untouched). `truncated`, if given, is set
  // when a FortranInt read lost bits. Lock-free.
  Result get_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Binding as,
                  void* attribute_val, int* flag, bool* truncated = nullptr) const;
  // Deletes an attribute: its delete callback runs; if it fails the attribute stays.
  // AttrAbsent if it was not set. A keyval the user freed while attributes still use it is
  // accepted here (and only here): the standard frees those attributes by MPI_*_DELETE_ATTR.
  Result delete_attr(ObjectKind kind, Handle handle, KeyvalId keyval, Origin origin = 0);
  // delete_attr's checks without deleting anything: Ok when delete_attr would accept the call
  // (AttrAbsent is not checked); *present (if given): the attribute is set.
  Result check_delete(ObjectKind kind, Handle h, KeyvalId keyval, int* present) const;
  // Supplies a predefined attribute's value on an object (host only: bypasses the read-only rule).
  Result install_predefined(ObjectKind kind, Handle handle, KeyvalId keyval, Binding repr,
                            std::uint64_t value);

  // --- finalize ---
  // Deletes MPI_COMM_SELF's attributes (newest first; continues past failures), optionally
  // MPI_COMM_WORLD's, then refuses further calls with Status::Finalized. Calls made by the
  // delete callbacks themselves while finalize runs are served normally.
  FinalizeReport finalize(const FinalizeOptions& options = FinalizeOptions{});
  bool finalized() const noexcept;

  // --- concurrency ---
  // The host promises that from now on no two engine calls overlap in time (an MPI program below
  // MPI_THREAD_MULTIPLE, whose MPI calls the runtime lets through from one thread at a time): the
  // engine stops taking its lock. Call it while no other thread uses the engine. No way back.
  void drop_locking();

  // A host that changes attributes in a cache of its own and runs their delete callbacks itself
  // (the runtime's emulate mode, while one thread calls MPI at MPI_THREAD_MULTIPLE) may be in such
  // a callback for an object when another thread starts calling and makes the engine current. That
  // thread holds the object for the first one (`holder`: its thread_token()): until then the other
  // threads' changes of it (sets, deletes, dups, frees) wait, as for callbacks the engine runs.
  // The holder's next set or delete of it (set_attr_ran, set_attr_after_delete, delete_attr_ran,
  // set_attr, delete_attr) takes the hold over and ends it with the change; release_hold ends it
  // if the holder makes none. False: the object is not registered or another thread is changing
  // it (no hold).
  static const void* thread_token() noexcept;
  bool hold_object(ObjectKind kind, Handle handle, const void* holder);
  // Ends this thread's hold of the object if it is still held (no-op otherwise).
  void release_hold(ObjectKind kind, Handle handle);

  // --- versions, for callers that memoise answers (docs/engine.md, "Versions") ---
  // Advances with every change of state a get_attr can observe; odd while a change is under way.
  // A get_attr answer read while version() was an even V is still the answer while it reads V.
  std::uint64_t version() const noexcept;
  // Advances whenever the validity of a (kind, handle, keyval) query can change: a keyval
  // created, freed or destroyed, an object registered or unregistered, a predefined keyval
  // registered, finalize. Setting and deleting attributes leave it alone. Never 0.
  std::uint64_t layout_version() const noexcept;
  // Advances both, for a host whose own part of a query's validity changed (the runtime's map
  // from library keyvals to engine keyvals; MPI opening or closing).
  void advance_layout();
  // The counters behind the two, for a hot path that reads them inline (load with acquire).
  const std::atomic<std::uint64_t>* version_counter() const noexcept;
  const std::atomic<std::uint64_t>* layout_counter() const noexcept;

  // --- introspection ---
  bool keyval_info(KeyvalId id, KeyvalInfo* out) const;
  std::vector<KeyvalInfo> live_keyvals() const;             // user keyvals not destroyed
  std::vector<KeyvalInfo> leaked_keyvals() const;           // user keyvals never freed
  std::vector<AttributeInfo> attributes() const;            // every attribute on every object
  std::vector<AttributeInfo> attributes(ObjectKind kind, Handle handle) const;  // newest last
  std::vector<ObjectInfo> objects() const;
  bool object_info(ObjectKind kind, Handle handle, ObjectInfo* out) const;  // false if not live
  bool is_engine_keyval(KeyvalId id) const noexcept;        // created by this engine (any state)
  // Bytes the engine holds for attribute storage (tables and Fortran value cells).
  std::size_t attribute_bytes() const;

  // A flag false while no attribute has ever been set from Fortran (FortranAint / FortranInt):
  // every value is then held as C set it, and a C read returns the word itself. For a hot path
  // that reads it inline, lock-free (load with acquire).
  const std::atomic<bool>* fortran_values_flag() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attrcheck
