// Findings and the per-rank report.
//
// Findings live in a fixed table of plain structs, so that the report can be rendered and
// written from a fatal-signal handler: rendering allocates nothing and writes with write(2);
// the file is written to a temporary name and renamed into place (no symlink followed).
// The same rule at the same call site (from the same MPI call, with the same message, for the same
// keyval) is one finding with a count.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "attrcheck/engine.hpp"
#include "checks/rules.hpp"

namespace attrcheck {

inline constexpr char kReportSchema[] = "attrcheck.rank-report";
inline constexpr char kReportVersion[] = "1.8";
inline constexpr char kToolVersion[] = "0.1.0";

// Copies `src` (null: "") into `dst`, truncating to `size` - 1 characters; no allocation.
void copy_str(char* dst, std::size_t size, const char* src) noexcept;

// Builds text into a fixed buffer, truncating; no allocation (usable in signal handlers).
struct Appender {
  char* out;
  std::size_t size;
  std::size_t n = 0;
  void put(const char* s) noexcept;
  void num(long long v) noexcept;
  void hex(unsigned long long v) noexcept;
  // A keyval as the library's users know it: a decimal number (Open MPI's small integers), or,
  // once set_keyvals_in_hex(true), its 32 bits in hex (MPICH's keyvals are handles, 0xa4400001,
  // that read as negative decimals). Async-signal-safe.
  void keyval(long long v) noexcept;
};

// How Appender::keyval writes keyvals for the rest of the process (the runtime sets it once, for
// the library it was built against, before any finding).
void set_keyvals_in_hex(bool hex) noexcept;

// A stack as stored in a finding: plain data, resolved to module + offset when recorded.
inline constexpr int kStackFrames = 16;
struct Frame {
  const void* address;
  std::uint64_t offset;  // address - its module's base
  int module;            // index into the store's module table, -1 if unknown
  bool entry = false;    // an instruction's own address (where a signal hit), not a return address
  int python = -1;       // a Python frame: index into the store's Python frame table (then no
                         // module or offset; `address` is its tagged word, python_frames.hpp)
};
struct StackRec {
  int depth = 0;
  // In the report's stack depot (FindingStore::number_stack): `id` is the position, in record
  // order over all findings' stacks, of the first stack equal to this one; `first` if that is this.
  int id = 0;
  bool first = false;
  Frame frames[kStackFrames];
};

// Where something this finding is about happened ("keyval created", "keyval freed", ...).
struct ProvenanceInput {
  const char* what = nullptr;
  const void* const* frames = nullptr;
  int depth = 0;
};
inline constexpr int kMaxProvenance = 2;

// How a finding's keyval was made: each callback a predefined one by its name, or a function by
// its entry address, and the extra state. It names a keyval where its functions have no names (a
// stripped library's), for suppressions (README, Suppressions: keyval:).
struct KeyvalCallbacksInput {
  const char* copy_name = nullptr;    // e.g. "MPI_COMM_NULL_COPY_FN"; null: copy_fn
  const void* copy_fn = nullptr;
  const char* delete_name = nullptr;  // e.g. "MPI_COMM_NULL_DELETE_FN"; null: delete_fn
  const void* delete_fn = nullptr;
  std::uint64_t extra_state = 0;
};

// What a check found, as handed to FindingStore::record().
struct FindingInput {
  Rule rule;
  const char* call = nullptr;         // the MPI function, e.g. "MPI_Comm_set_attr"
  const void* site = nullptr;         // return address into the application
  bool site_is_entry = false;         // `site` is a function's entry (a callback), not a return address
  const char* site_symbol = nullptr;  // already known (signal path): skips symbolization
  bool has_keyval = false;
  int keyval = 0;
  bool has_object = false;
  ObjectKind kind = ObjectKind::Comm;
  Handle object = 0;
  const char* object_name = nullptr;  // e.g. "MPI_COMM_WORLD"
  const char* detail = nullptr;
  const char* replacement = nullptr;
  ProvenanceInput provenance[kMaxProvenance];
  int provenance_count = 0;
  bool has_callbacks = false;  // the keyval's (add_keyval_provenance)
  KeyvalCallbacksInput callbacks;
  // The signal path's own stack (record_async_signal_safe captures none): its first frame is the
  // instruction a signal hit, looked up as is; the others are return addresses.
  const void* const* fault_stack = nullptr;
  int fault_stack_depth = 0;
  // The calling thread's Python frames (python_frames.hpp words, innermost first), placed into the
  // stack the store captures; the innermost one is part of the finding's identity (every call from
  // Python has the same native call site). None on the signal path.
  void* const* python_frames = nullptr;
  int python_depth = 0;
  bool no_stack = false;  // a fact about the run, not about a place in the program: no stack
  int severity = -1;      // the finding's own severity (a Severity), or -1: its rule's
  // A portability finding's: the answer here, and the release series (ids, separated by spaces)
  // where the answer differs.
  const char* portability_here = nullptr;
  const char* portability_series = nullptr;
};

struct Finding {
  std::atomic<bool> committed{false};
  std::atomic<std::uint64_t> count{0};
  // The count the job's gathered report holds (FindingStore::mark_gathered); what a report written
  // after it adds is the difference ("gathered_count" in the JSON, for the merge).
  std::atomic<std::uint64_t> gathered{0};
  Rule rule = Rule::Count;
  Severity severity = Severity::Error;  // its rule's, or the finding's own (FindingInput::severity)
  const void* site = nullptr;
  bool site_is_entry = false;
  const void* python_site = nullptr;  // the innermost Python frame's word, or null
  int python_site_frame = -1;         // ... its index in the store's Python frame table
  std::uint64_t message_hash = 0;  // part of the identity: freeing MPI_COMM_WORLD and MPI_COMM_SELF
                                   // at one site are two findings (hex numbers left out)
  std::uint64_t offset = 0;        // site - its module's base: the same in every rank despite ASLR
  bool has_keyval = false;
  int keyval = 0;
  bool has_object = false;
  ObjectKind kind = ObjectKind::Comm;
  Handle object = 0;
  char call[64] = {};
  char object_name[32] = {};
  char message[384] = {};
  char hint[256] = {};
  char portability_here[48] = {};     // FindingInput's portability_here, or empty
  char portability_series[128] = {};  // ... portability_series
  char symbol[192] = {};
  char module[192] = {};
  StackRec stack;                    // where: the calling stack, attrcheck and MPI frames trimmed
  struct Provenance {
    char what[32] = {};
    StackRec stack;
  } provenance[kMaxProvenance];
  int provenance_count = 0;
  // The keyval's callbacks: a predefined one's name, or MODULE+0xOFFSET of the function's entry
  // (0xADDRESS where no module holds it); its extra state.
  bool has_callbacks = false;
  char copy_callback[256] = {};
  char delete_callback[256] = {};
  std::uint64_t extra_state = 0;
};

// What the run intercepted, counted by the runtime and rendered as the report's "intercepted":
// calls by family and binding (mpif.h and `use mpi` share their entry points: "fortran").
inline constexpr int kCallFamilies = 4, kCallBindings = 3;
inline constexpr const char* kCallFamilyNames[kCallFamilies] = {"keyval", "attribute", "object", "callback"};
inline constexpr const char* kCallBindingNames[kCallBindings] = {"c", "fortran", "f08"};
// Fills the counts; async-signal-safe (the report may be written from a signal handler).
using CallCountReader = void (*)(std::uint64_t out[kCallFamilies][kCallBindings]) noexcept;

// Run-level facts written into the report; plain data, filled at MPI_Init.
struct RunInfo {
  int rank = -1;
  int size = 0;
  long pid = 0;
  // The job this process belongs to: `job` as the process manager names it (empty if it does not
  // say), `spawned` if the job was started by MPI_Comm_spawn (it has a parent).
  char job[64] = "";
  bool spawned = false;
  char mode[16] = "shadow";
  char on_error[16] = "report";
  char thread_level[32] = "";
  char mpi_library[160] = "";
  char mpi_profile[32] = "";  // the release series of the library profile in use ("openmpi-5.0")
  std::atomic<const char*> status{"running"};  // a string literal
  std::atomic<int> signal{0};
  CallCountReader call_counts = nullptr;  // nullptr: the report says nothing of them
};

class Journal;
class SymbolTable;

class FindingStore {
 public:
  static constexpr std::size_t kCapacity = 1024;

  // The entries (~2.4 MiB) are mapped, not allocated: a page is touched only when a finding lands
  // on it, so the many processes the library is preloaded into without ever reporting anything
  // (mpirun, shells, a clean rank) do not pay for zeroing them at load time.
  FindingStore() noexcept;
  ~FindingStore();
  FindingStore(const FindingStore&) = delete;
  FindingStore& operator=(const FindingStore&) = delete;

  // Frames recorded per stack (0: none); set once at start-up (ATTRCHECK_STACK_DEPTH).
  void set_stack_depth(int depth) noexcept { stack_depth_ = depth < 0 ? 0 : depth > kStackFrames ? kStackFrames : depth; }
  int stack_depth() const noexcept { return stack_depth_; }

  // Records (or counts) a finding. Normal path: may symbolize. Thread-safe.
  void record(const FindingInput& in) noexcept;
  // For signal handlers: never blocks (drops the finding if the store is busy), never allocates.
  void record_async_signal_safe(const FindingInput& in) noexcept;

  std::size_t size() const noexcept { return std::min<std::size_t>(used_.load(std::memory_order_acquire), kCapacity); }
  const Finding& at(std::size_t i) const noexcept { return entries_[i]; }
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  // Count of findings (with repetitions) at each severity.
  void counts(std::uint64_t out[3]) const noexcept;
  // Whether any finding is at or above `threshold` (0 error, 1 warning, 2 info; -1 never).
  bool any_at_or_above(int threshold) const noexcept;
  std::uint64_t version() const noexcept { return version_.load(std::memory_order_acquire); }
  // Where each new finding is also appended as it is recorded (nullptr: nowhere).
  void set_journal(Journal* journal) noexcept { journal_.store(journal, std::memory_order_release); }
  // Names for the findings' addresses, found in-process at the normal end (symbolize.hpp); the
  // reports written after this carry them. Never freed once set (a signal handler may read it).
  void set_symbols(const SymbolTable* table) noexcept {
    symbols_.store(table, std::memory_order_release);
    version_.fetch_add(1, std::memory_order_release);
  }
  const SymbolTable* symbols() const noexcept { return symbols_.load(std::memory_order_acquire); }
  // The findings as they are now are in the job's gathered report: each remembers its count, and
  // reports written from now on say it ("gathered_count"), so the merge adds only what came after.
  void mark_gathered() noexcept;
  // Ends the journal's hold (Journal::hold): the findings held back are written to it now.
  void release_journal() noexcept;

 private:
  void record_impl(const FindingInput& in, bool signal_safe) noexcept;
  // Takes the writer flag (busy_); true if taken. `wait`: as long as another writer holds it, up
  // to 2 s, yielding the processor (that writer may be descheduled: more threads than cores),
  // then gives up (a process forked while a thread held the flag); else one try (a signal
  // handler: the code it interrupted may hold the flag).
  bool take_writer(bool wait) noexcept;
  std::atomic<Journal*> journal_{nullptr};
  std::atomic<const SymbolTable*> symbols_{nullptr};

  Finding* entries_;  // kCapacity entries, each constructed when its slot is claimed; null if unmapped
  std::atomic<std::size_t> used_{0};
  std::atomic<bool> busy_{false};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> version_{0};  // bumps on every change: rewrite the report if moved
  int stack_depth_ = kStackFrames;

 public:
  // The modules stacks point into (absolute paths), shared by all findings.
  static constexpr int kModules = 64;
  int modules() const noexcept { return modules_used_.load(std::memory_order_acquire); }
  const char* module(int i) const noexcept { return i >= 0 && i < modules() ? modules_[i] : ""; }

 private:
  // Fills `out` from raw return addresses (normal path: uses dladdr), dropping the innermost
  // frames that are inside attrcheck or the MPI library, keeping at most `max_depth`.
  void resolve_stack(const void* const* frames, int depth, int max_depth, StackRec* out) noexcept;
  void resolve_stack_async_signal_safe(const void* const* frames, int depth, int max_depth, StackRec* out) noexcept;
  int intern_module(const char* path) noexcept;  // caller holds busy_
  char modules_[kModules][192] = {};
  std::atomic<int> modules_used_{0};
  // Where each module seen in a stack lies, so that a frame in it is placed without dladdr (which
  // scans the module's symbols): what resolve_stack needs of the module. Caller holds busy_.
  struct ModuleSpan {
    const void* start;
    const void* end;
    const void* link_map;
    const void* base;  // dladdr's dli_fbase
    int module;        // index into modules_
    bool tool;         // attrcheck's or the MPI library's own
  };
  bool module_span(const void* pc, ModuleSpan* out) noexcept;
  ModuleSpan spans_[kModules];
  int spans_used_ = 0;
  // Gives a new finding's stack its depot id: equal stacks are found through a hash index in the
  // entries' mapping, so writing a report is linear in its stacks. Caller holds busy_.
  void number_stack(StackRec& s) noexcept;
  struct StackIndexSlot {
    std::uint64_t hash;
    const StackRec* stack;
  };
  static constexpr std::size_t kStackIndex = 4096;  // > every stack kCapacity findings can hold
  StackIndexSlot* stack_index_ = nullptr;           // kStackIndex slots after the entries
  int stacks_ = 0;                                   // stacks numbered so far

 public:
  // The Python frames stacks hold (file, function, line, copied: the report is written without
  // Python, maybe from a signal handler), shared by all findings; mapped on first use.
  static constexpr int kPythonFrames = 512;
  struct PythonFrame {
    std::uint32_t id;  // python_frames.hpp's
    int line;
    char file[256];
    char function[128];
  };
  int python_frames() const noexcept { return python_used_.load(std::memory_order_acquire); }
  const PythonFrame* python_frame(int i) const noexcept {
    return i >= 0 && i < python_frames() ? &python_[i] : nullptr;
  }

 private:
  int intern_python(const void* word) noexcept;  // caller holds busy_; -1 if unknown or full
  PythonFrame* python_ = nullptr;
  std::atomic<int> python_used_{0};
};

// The path reports name a module by: `name` as dladdr gives it, made absolute (dladdr names the
// main program as it was started, e.g. "./app"), so the report can be symbolized after the run.
void module_path(const char* name, char* out, std::size_t size) noexcept;

// Renders the report as JSON to `fd`. Async-signal-safe. False if a write failed.
bool render_json(int fd, const RunInfo& run, const FindingStore& store) noexcept;
// The human summary, like the sanitizers print it. Async-signal-safe.
void render_summary(int fd, const RunInfo& run, const FindingStore& store) noexcept;

// The job identity the process manager put in the environment: PMIx's namespace (Open MPI, and any
// PMIx launcher), else Open MPI's job id; "" if neither (MPICH's Hydra names its jobs only over the
// PMI connection). Only [A-Za-z0-9._-] are kept, so it can be part of a file name. Call at init.
void find_job_identity(char* out, std::size_t size) noexcept;
// A rank's report file name: rank-N.json in the job the user started; job-ID-rank-N.json in a job
// started by MPI_Comm_spawn (ID: the job identity, or pidP when there is none), so that spawned
// jobs, whose world ranks start at 0 again, do not overwrite each other's reports.
void report_file_name(const RunInfo& run, char* out, std::size_t size) noexcept;
// The same for another rank of the job (world rank `rank`).
void report_file_name(const RunInfo& run, int rank, char* out, std::size_t size) noexcept;

// Where a rank's report goes; paths are prepared once (at init) so writing needs no allocation.
class ReportFile {
 public:
  // Creates `dir` if needed. `name` is the file name, e.g. "rank-3.json". False + message on error.
  bool prepare(const char* dir, const char* name, char* error, std::size_t error_size) noexcept;
  bool ready() const noexcept { return path_[0] != '\0'; }
  // Writes the report: temporary file, then rename. Async-signal-safe. False on failure.
  bool write(const RunInfo& run, const FindingStore& store) noexcept;
  const char* path() const noexcept { return path_; }

 private:
  char path_[1024] = {};
  char tmp_[1100] = {};
};

// The rank's findings as they are found, for a process that is killed without warning (SIGKILL
// from Hydra after another rank's MPI_Abort, the OOM killer, a batch system): one JSON line per
// new finding, appended with write(2) (no allocation, async-signal-safe), after a header line with
// the run. The file is created by the first finding (open(2) is async-signal-safe): a rank that
// finds nothing never touches the file system. Each line carries the finding's index in the store ("seq"): a rank report written
// later holds findings 0..n-1, so the merge (reports/attrcheck_report.py) adds the journal's
// findings from n on, or rebuilds the rank from the journal alone when no report was written.
// Once a final report holds everything, the journal is removed.
inline constexpr char kJournalSchema[] = "attrcheck.rank-journal";
class Journal {
 public:
  // Arms the journal at `path` and attaches it to `store`: the first finding recorded from now on
  // creates the file (replacing one there, never following a symlink) with `run`'s header and
  // every finding so far; with `now`, findings recorded already create it at once. A journal
  // already open elsewhere is closed and removed first. False if the file cannot be created (the
  // run goes on without one).
  bool start(const char* path, const RunInfo& run, FindingStore& store, bool now) noexcept;
  // Appends finding `index` of `store`. Called by the store, under its writer flag.
  void append(const FindingStore& store, std::size_t index) noexcept;
  // The findings before `count` are in the job's gathered report with the counts they have now:
  // a line {"gathered": count} says so (the merge then adds only what comes after, if the job's
  // report holds this rank). Called by the store, under its writer flag.
  void mark_gathered(std::size_t count) noexcept;
  // A report holds every finding: detaches from `store`, closes and removes the journal.
  void finish(FindingStore& store) noexcept;
  bool active() const noexcept { return fd_.load(std::memory_order_acquire) >= 0; }
  // While held, findings make no file (one already made is still appended to): MPI_Finalize's
  // findings, which the job's report takes a moment later, or the rank's own report if not.
  void hold(bool held) noexcept { held_.store(held, std::memory_order_release); }

 private:
  bool open_file() noexcept;  // under the store's writer flag
  std::atomic<int> fd_{-1};
  const RunInfo* run_ = nullptr;
  bool failed_ = false;
  std::atomic<bool> held_{false};
  char path_[1024] = {};
};

// Fills `message` from a rule template. Exposed for tests.
void expand_template(const char* tmpl, const FindingInput& in, char* out, std::size_t size) noexcept;

}  // namespace attrcheck
