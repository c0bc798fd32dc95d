// The process's state: the mode and phase, the configuration, and what the runtime keeps for the
// whole process (the engine, the findings and the report, the keyval records, the handles freed or
// handed out again, the provenance depot). Created on first use. Not a public header.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "attrcheck/engine.hpp"
#include "attrcheck/provenance.hpp"
#include "report/report.hpp"
#include "runtime/process/handle_set.hpp"

namespace attrcheck::rt {

enum class Mode : std::uint8_t { Shadow, Emulate, Off };
enum class OnError : std::uint8_t { Report, Errhandler, Abort };
enum class Phase : int { BeforeInit = 0, Running = 1, Finalizing = 2, Finalized = 3 };


struct KeyRecord;  // (keyvals.hpp)

struct Runtime {
  Mode mode = Mode::Shadow;
  OnError on_error = OnError::Report;
  char output_dir[900] = "attrcheck-out";
  bool rank_summary = true;  // each rank prints its own summary (the launcher turns it off)
  bool provenance_stacks = true;  // keyval create / free keep whole stacks (else the call site)
  // ... with the thread's Python frames: a program whose Python frames are read (set at MPI_Init,
  // when provenance_stacks is cleared in its favour, so that origin_here's one test of
  // provenance_stacks is all a program without Python pays).
  bool provenance_python_stacks = false;
  bool symbolize = true;  // name the report's frames in-process at MPI_Finalize (report/symbolize.hpp)
  std::uint32_t max_keyvals = 0, max_objects = 0;  // testing: lower engine capacities (0: its own)
  // The release series (a bit per rt::Release) whose portability findings are warnings
  // (ATTRCHECK_PORTABLE_TO: portability.hpp).
  std::uint32_t portable_to = 0;
  // How long a rank takes part in gathering the job's report at MPI_Finalize (gather.hpp); 0: no
  // gather, every rank writes its own report.
  int gather_timeout_ms = 30000;

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
  std::uint64_t gathered_version = ~0ULL;  // the findings' version when they went into the job's report

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

inline Phase phase() noexcept { return static_cast<Phase>(state().phase.load(std::memory_order_acquire)); }


// The mode as the wrappers and the fast paths test it, set once, before any wrapper can run (the
// configuration is read at load).
[[gnu::visibility("hidden")]] extern bool g_off;     // Mode::Off: every call goes straight to PMPI
[[gnu::visibility("hidden")]] extern bool g_shadow;  // Mode::Shadow

}  // namespace attrcheck::rt
