// The runtime's shared internals (between runtime.cpp and hooks.cpp). Not a public header.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/process/handle_set.hpp"
#include "attrcheck/engine.hpp"
#include "attrcheck/provenance.hpp"
#include "report/report.hpp"
#include "runtime/fast_path.hpp"
#include "runtime/hooks.hpp"
#include "runtime/mpi_profile.hpp"
#include "runtime/callbacks/run_list.hpp"

namespace attrcheck::rt {

enum class Mode : std::uint8_t { Shadow, Emulate, Off };
enum class OnError : std::uint8_t { Report, Errhandler, Abort };
enum class Phase : int { BeforeInit = 0, Running = 1, Finalizing = 2, Finalized = 3 };

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

// A callback the library (shadow) or the engine (emulate) ran, as the trampoline saw it.
struct Observation {
  bool copy;
  ObjectKind kind;
  Handle object;
  int engine_id;
  int rc;  // (beside engine_id: the quick ways test both in one compare, ran_as_expected)
  std::uint64_t value_in;
  int flag;
  std::uint64_t value_out;
  bool used;
  MPI_Fint fortran_object;  // a Fortran callback's handle as the library passed it (0 if none:
                            // aggregate initialisation zeroes what it is not given)
};

static_assert(offsetof(Observation, rc) == offsetof(Observation, engine_id) + sizeof(int), "read as one word");

// Whether a delete callback the library ran (`o`) is the one the model requires of the attribute
// (h, engine_key) holding `value`: on that object, for that keyval, with that value, successfully.
// (engine_id and rc in one 64-bit compare with {engine_key, MPI_SUCCESS}: little-endian x86_64 /
// aarch64, where the first int is the low half.)
inline bool ran_as_expected(const Observation& o, Handle h, int engine_key, std::uint64_t value) noexcept {
  static_assert(MPI_SUCCESS == 0, "the high half of the expected word");
  std::uint64_t id_rc;
  std::memcpy(&id_rc, &o.engine_id, sizeof id_rc);
  return !o.copy && id_rc == static_cast<std::uint32_t>(engine_key) && o.object == h && o.value_in == value;
}

// A list that keeps its first N elements inline: the usual forwarded call sees a callback or
// two, and a heap allocation per set would cost more than the rest of the bookkeeping.
template <typename T, std::size_t N>
class InlineList {
  static_assert(std::is_trivially_copyable_v<T>, "elements are copied as bytes");
  // The inline elements are left uninitialised: a member initialiser in T would make every
  // forwarded call (each builds a Replay) initialise all N of them (+30 instructions a shadow set).
  static_assert(std::is_trivially_default_constructible_v<T>, "inline storage must cost nothing to construct");

 public:
  InlineList() noexcept {}
  ~InlineList() {
    if (size_ > N) delete[] heap_;
  }
  InlineList(const InlineList&) = delete;
  InlineList& operator=(const InlineList&) = delete;
  // The new last element (uninitialised).
  T& emplace_back() {
    if (__builtin_expect(size_ < N, 1)) return inline_[size_++];
    return spill();
  }
  void push_back(const T& v) { emplace_back() = v; }
  // Empties the list, the heap block of a spill freed (as a new list).
  void clear() noexcept {
    if (size_ > N) delete[] heap_;
    size_ = 0;
  }
  std::size_t size() const noexcept { return size_; }
  T* begin() noexcept { return size_ <= N ? inline_ : heap_; }
  T* end() noexcept { return begin() + size_; }
  const T* begin() const noexcept { return size_ <= N ? inline_ : heap_; }
  const T* end() const noexcept { return begin() + size_; }

 private:
  // Past N, every element lives on the heap (doubling). The first spill makes room for
  // kFirstSpill: a call that runs more callbacks than N usually runs one per attribute of an
  // object (a dup or free), and doubling from N reallocated and copied three times on the way to
  // 64 (~70 instructions a callback, Open MPI shadow free of 64 attributes, callgrind).
  static constexpr std::size_t kFirstSpill = N < 64 ? 64 : 2 * N;
  T& spill() {
    if (size_ == N || size_ == capacity_) {
      const std::size_t capacity = size_ == N ? kFirstSpill : size_ * 2;
      T* bigger = new T[capacity];
      std::memcpy(static_cast<void*>(bigger), size_ == N ? inline_ : heap_, size_ * sizeof(T));
      if (size_ > N) delete[] heap_;
      heap_ = bigger;
      capacity_ = capacity;
    }
    return heap_[size_++];
  }

  std::size_t size_ = 0;
  // heap_ and capacity_ are set by the first spill and read only past N (every forwarded call
  // builds a list: two stores fewer).
  std::size_t capacity_;
  T* heap_;
  T inline_[N];
};

// Shadow dup / free: the library's runs of the C callbacks of the object being duplicated (copy
// callbacks) or freed (delete callbacks), logged by the trampolines directly in the terms
// Engine::dup_object_ran / free_object_ran take, instead of as Observations converted afterwards
// (MPICH dup + free of 64 attributes [user]: the conversions, the Observations' growth and their
// heap block cost ~80 instructions an attribute, callgrind). One per thread, reused (its lists
// keep their capacity); a dup or free run from inside a callback of another finds it busy and
// goes without (object_hooks.cpp).
struct RunLog {
  RunList<RanCopy> copies;
  RunList<RanDelete> deletes;
  // No object: no MPI library's handle is all ones.
  static constexpr Handle kNone = ~Handle{0};
  // The object whose copy callbacks (a dup) or whose delete callbacks (a free) are logged, the
  // other kNone: a trampoline tests its own in one compare (~2 instructions a run fewer than
  // testing a copy-or-delete flag and the object).
  Handle copies_of = kNone;
  Handle deletes_of = kNone;
  ObjectKind kind = ObjectKind::Comm;
  bool odd_flag = false;  // a logged copy callback set *flag to neither 0 nor 1
  bool busy = false;
};

// Collects the callbacks the library runs during one forwarded call, then answers the engine's
// mirror of that call from them (shadow mode): the engine never runs user code twice.
// (Every forwarded call builds one: the fields it initialises are together, the two flags in one
// store, and ordered_object is left alone until has_ordered_object says it is there.)
struct Replay {
  const Call* call = nullptr;
  Replay* outer = nullptr;
  RunLog* log = nullptr;       // runs for one object logged apart from `seen` (dup / free)
  std::size_t used_below = 0;  // seen[0 .. used_below) are all used (callbacks.cpp)
  bool lenient = false;        // missing / extra callbacks are expected (no divergence)
  bool has_ordered_object = false;
  Handle ordered_object;       // delete callbacks on this object must come in the engine's order
  InlineList<Observation, 8> seen;
};

struct Runtime {
  Mode mode = Mode::Shadow;
  OnError on_error = OnError::Report;
  char output_dir[900] = "attrcheck-out";
  bool rank_summary = true;  // each rank prints its own summary (the launcher turns it off)
  bool provenance_stacks = true;  // keyval create / free keep whole stacks (else the call site)
  bool symbolize = true;  // name the report's frames in-process at MPI_Finalize (report/symbolize.hpp)
  std::uint32_t max_keyvals = 0, max_objects = 0;  // testing: lower engine capacities (0: its own)

  std::atomic<int> phase{static_cast<int>(Phase::BeforeInit)};
  // The library's own MPI_Finalize is running (inside our MPI_Finalize hook's forward): calls
  // that reach the hooks then without a callback of ours on the thread are the library's own
  // housekeeping (MPICH's ROMIO frees, through MPI_Type_free_keyval, a keyval it made through
  // PMPI), not the program's: passed through unchecked.
  std::atomic<bool> library_finalizing{false};
  int thread_level = MPI_THREAD_SINGLE;
  std::atomic<const void*> first_thread{nullptr};
  std::atomic<int> calls_in_flight{0};

  Engine* engine = nullptr;
  FindingStore findings;
  RunInfo run;
  ReportFile report;
  Journal journal;  // new findings, on disk as they are found (until the final report)
  std::atomic<std::uint64_t> written_version{~0ULL};

  // Keyval records, indexed by engine slot (every slot the engine can hand out).
  static constexpr int kChunk = 1024, kChunks = (1 << kKeyvalSlotBits) / kChunk;
  std::atomic<KeyRecord*> records[kChunks] = {};

  // Shadow mode: the library's keyval -> engine keyval.
  static constexpr int kSmallKeys = 1 << 16;
  std::atomic<int> small_keys[kSmallKeys] = {};
  // (Other keys, MPICH's: keyvals.cpp.)

  // Handles freed through the tool and not handed out again: using one is object.invalid.
  std::mutex freed_mu;
  HandleSet freed[kObjectKinds];
  // Extra references the library handed out to live objects (MPI_Type_get_contents), each owed
  // one free before the object goes; reference_count: their total, so frees check it in one load.
  std::unordered_map<Handle, int> references[kObjectKinds];
  std::atomic<long> reference_count{0};

  // Past a capacity of the engine (tool.limit, reported once each), calls are passed to the library
  // unchecked: keyvals created since (unchecked_keys), and objects the engine cannot register.
  std::atomic<bool> limited{false};
  std::atomic<bool> objects_full{false};
  std::mutex unchecked_mu;
  std::unordered_set<int> unchecked_keys;

  Handle world = 0, self = 0;

  // Provenance: where keyvals were created / freed (whole stacks), attributes set and objects
  // created (the call site only: those are on hot paths).
  StackDepot depot;
};

// The runtime, created on first use (the configuration is read then).
extern std::atomic<Runtime*> g_runtime;
Runtime& create_state() noexcept;
inline Runtime& state() noexcept {
  Runtime* r = g_runtime.load(std::memory_order_acquire);
  return r ? *r : create_state();
}

// Keyvals.
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

// Objects (objects.cpp): registers an unknown, non-null handle the tool never saw created
// (predefined datatypes, objects MPI made internally). False if the handle was freed through the
// tool and no call returned it since, unless `library_vouches` (the handle came through the
// library's Fortran handle table), a callback is running for it, or library_has_live says so.
bool adopt(ObjectKind kind, Handle h, bool library_vouches = false);
// Whether the library has a live object of `kind` with handle `h`, asked without handing it a
// handle that may name a freed object (objects.cpp: how, per library). False when it cannot tell.
bool library_has_live(ObjectKind kind, Handle h) noexcept;
// The object adopt() last registered on this thread: t_state.ctx.adopted (fast_path.hpp).
inline bool adopted_now(ObjectKind kind, Handle h) noexcept {
  return t_state.ctx.adopted.set && t_state.ctx.adopted.h == h && t_state.ctx.adopted.kind == kind;
}
// Past the engine's capacity (objects.cpp): reports tool.limit once per `what`, and from then on
// unchecked() says which calls go to the library unchecked (a key created past the keyval limit,
// an object the engine could not register).
void note_limit(const char* what, const char* detail);
void add_unchecked_key(int key);
void object_limit();  // the engine could not register an object
bool unchecked_slow(ObjectKind kind, const Handle* h, const int* key);
inline bool unchecked(ObjectKind kind, const Handle* h, const int* key) {  // either may be null
  return __builtin_expect(state().limited.load(std::memory_order_relaxed), 0) && unchecked_slow(kind, h, key);
}
// MPI_THREAD_MULTIPLE, shadow: the library runs `h`'s delete callbacks inside this thread's free
// of another object, so releases `h` too: another thread's registration of `h` waits until the
// free's mirror is done (object_hooks.cpp).
void hold_deferred_free(Handle h) noexcept;
void note_freed(ObjectKind kind, Handle h);
void note_created(ObjectKind kind, Handle h);
bool live_object(ObjectKind kind, Handle h) noexcept;
// A live object's handle returned again by the library (one more free owed), and its free.
// drop_reference: true when the free only dropped such a reference (the object lives on).
void add_reference(ObjectKind kind, Handle h);
bool drop_reference(ObjectKind kind, Handle h);
void forget_references(ObjectKind kind, Handle h);
// Asks the library (PMPI) whether `h` carries attribute `key` (the user's keyval number).
// `lang`: how the value was set (a Fortran-set value is read as Fortran reads it).
bool library_attr(ObjectKind kind, Handle h, int key, std::uint64_t* value, Binding lang = Binding::C) noexcept;
MPI_Fint fortran_handle(ObjectKind kind, Handle h) noexcept;
Handle c_handle(ObjectKind kind, MPI_Fint f) noexcept;  // the library's f2c (a live object's handle, or null)

// Callback plumbing (callbacks.cpp; the trampolines: trampolines.cpp).
CallbackInvoker* new_invoker();  // the engine's: runs user callbacks, or replays the library's runs
void* trampoline_copy(ObjectKind kind, Binding lang = Binding::C) noexcept;
void* trampoline_delete(ObjectKind kind, Binding lang = Binding::C) noexcept;

class ReplayScope {
 public:
  ReplayScope(const Call& call, bool lenient) noexcept {
    replay_.call = &call;
    replay_.lenient = lenient;
    replay_.outer = t_state.ctx.replay;
    t_state.ctx.replay = &replay_;
  }
  ~ReplayScope() { t_state.ctx.replay = replay_.outer; }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;
  Replay& replay() noexcept { return replay_; }
  void order_deletes_on(Handle h) noexcept { replay_.ordered_object = h; replay_.has_ordered_object = true; }
  // Reports callbacks the library ran that the engine did not ask for.
  void finish();
  // Moves the runs logged apart (Replay::log) into `seen`, for the replay one by one.
  void unlog();
  // Stops collecting, with nothing to report: the engine has accounted for every callback seen.
  void dismiss() noexcept { t_state.ctx.replay = replay_.outer; }

 private:
  Replay replay_;
};

// Shadow mode, the quiet replay (set_path.hpp): a Replay of the thread's own, kept from one
// call to the next, that the C set and delete wrappers' quick ways of a keyval with a user delete
// function install as t_state.ctx.replay (one store, and one to take it down) while the library
// runs the call, where a ReplayScope built and took down a Replay on the stack every call. It
// collects the callbacks the library runs as a ReplayScope's would; a call that ran what the
// model requires (nothing, or the old value's delete callback, which the trampoline marks
// instead of logging it: fast_path.hpp, ExpectedRun) leaves it empty, anything else hands its
// runs to a ReplayScope (take_quiet) and is mirrored as before. Installed only where no replay
// collects (t_state.ctx.replay == nullptr), so it is never in two uses at once: a quick way that
// finds a replay installed (a call the library makes through MPI_ inside another) takes the
// scoped way. t_state.ctx.quiet: nullptr until the thread's first out-of-line shadow set
// (install_quiet_replay), and again once the thread's storage is gone (thread exit).
void install_quiet_replay() noexcept;
// Moves the quiet replay's runs into `scope`'s replay and empties it; first, if the call
// `expected` a run and it was made (fast_path.hpp: ExpectedRun), that run (on `kind`'s object).
// Disarms the expectation.
void take_quiet(ReplayScope& scope, ObjectKind kind, bool expected) noexcept;
// Shadow mode: the end of a quick set whose runs the quiet replay collected and that cannot be
// deferred: mirrored with those runs (mirror_library_set), in a call scope of its own. (h, key,
// word): the set; rc: what the library returned. Returns what the call returns.
// quiet_replace_mirrored: the same for a replacing set, which armed an expected run. (Two
// functions, not a seventh argument: on the stack, it cost the set functions a frame pointer.)
int quiet_set_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc);
int quiet_replace_mirrored(const Api& api, const void* caller, Handle h, int key, std::uint64_t word, int rc);
// The same for a delete that did not cancel a set (delete_not_cancelled), inside the caller's
// call scope.
int quiet_delete_mirrored(const Call& call, Handle h, int key, int engine_key, int rc);

// Provenance. origin_here: the caller's stack (backtrace: microseconds; keyval create / free
// only, and only with ATTRCHECK_PROVENANCE=stack, else the call site); origin_site: just the call
// site, cached per thread (set, dup, constructors).
Origin origin_here(const Call& call);
// Call sites repeat (a library's set in a loop, a create/free pair): a small direct-mapped cache
// per thread keeps origin_site to a compare on the hot path; the depot is asked on a miss.
struct SiteCache {
  struct Entry {
    const void* site;
    Origin origin;
  };
  static constexpr int kSize = 16;
  static __thread Entry t_sites[kSize];
  // Multiplicative hash: neighbouring call sites (a create and a free 8 bytes apart) must not
  // share a bucket, or they evict each other forever.
  static Entry& slot(const void* site) noexcept {
    return t_sites[(reinterpret_cast<std::uintptr_t>(site) * 0x9E3779B97F4A7C15ULL) >> 60];
  }
  static Origin miss(const void* site);
};
static_assert(SiteCache::kSize == 16, "slot() hashes to 4 bits");
inline Origin origin_at(const void* site) {
  const SiteCache::Entry& e = SiteCache::slot(site);
  return e.site == site && e.site ? e.origin : SiteCache::miss(site);
}
inline Origin origin_site(const Call& call) { return origin_at(call.caller); }
// Adds "<what>" with the stack of `origin` to a finding (frames kept in `storage`).
struct ProvenanceStorage {
  std::vector<void*> frames[kMaxProvenance];
};
void add_provenance(FindingInput& in, ProvenanceStorage& storage, const char* what, Origin origin);
// The keyval's own provenance: where it was created (and freed, when `freed`).
void add_keyval_provenance(FindingInput& in, ProvenanceStorage& storage, int engine_key, bool freed);

// Findings and errors.
void report(const FindingInput& in);
FindingInput finding(Rule rule, const Call& call);
// Reports the finding matching an engine Status (nothing for Ok / callback failures).
void report_status(const Call& call, Status status, ObjectKind kind, Handle h, int user_key, int engine_key);
// The MPI error code for an engine result.
int error_code(Result r, ObjectKind kind) noexcept;
// Applies --on-error to a refused call and returns what the call returns.
int fail(const Call& call, ObjectKind kind, Handle h, int code);
// `site`: where the cross-check saw it; a divergence the library's profile lists for that site and
// call is named by its id (mpi_profile.def).
void divergence(const Call& call, const char* detail, bool has_keyval = false, int keyval = 0,
                DivergenceSite site = DivergenceSite::Unclassified);
// Shadow mode, after a free the library and the model both failed: attributes the library
// dropped all the same are dropped from the model (and reported).
void follow_failed_free(const Call& call, ObjectKind kind, Handle h);
// A C get the library answered with a pointer: whether the attribute was set from Fortran and the
// library's pointer points at its value (both sides return their own copy's address).
bool same_fortran_value(ObjectKind kind, Handle h, int engine_key, const void* value_out) noexcept;
const char* object_name(ObjectKind kind, Handle h) noexcept;
const char* kind_noun(ObjectKind kind) noexcept;  // "communicator", "datatype", "window"

// Lifecycle.
void started(int provided);
void write_report() noexcept;
// Starts the rank's journal beside its report (rank-N.journal): findings are on disk as they are
// found, for a rank killed without warning.
void start_journal() noexcept;
void print_summary() noexcept;

inline Phase phase() noexcept { return static_cast<Phase>(state().phase.load(std::memory_order_acquire)); }

}  // namespace attrcheck::rt
