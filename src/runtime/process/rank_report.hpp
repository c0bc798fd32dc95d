// The rank's report: named by rank once MPI runs, written on every exit path (MPI_Finalize,
// --on-error, exit without MPI_Finalize, fatal signals), with the journal beside it and the
// summary on stderr. Not a public header.
#pragma once

namespace attrcheck::rt {

void write_report() noexcept;
// Starts the rank's journal beside its report (rank-N.journal): findings are on disk as they are
// found, for a rank killed without warning. The file is made by the first finding from now on
// (or, with `now`, at once if there are findings already).
void start_journal(bool now) noexcept;
void print_summary() noexcept;
// The rank the MPI launcher gave this process in its environment (OMPI_COMM_WORLD_RANK,
// PMIX_RANK, PMI_RANK), or nullptr: for a process whose rank MPI cannot be asked for.
const char* launcher_rank() noexcept;

// Once MPI runs: the report is named by rank (and spawned job) from now on; one written before
// MPI_Init (pid-N.json) moves, and the journal starts beside it.
void report_as_rank();
// Once MPI runs: the report is written on every exit path from then on (fatal signals, and an
// exit without MPI_Finalize).
void install_exit_paths();
// The report at exit, registered when the library is loaded (an MPI run the tool did not see
// start still gets its report). g_exit_hook (set by the lifecycle hooks): what the run's end was
// when the tool saw neither MPI_Init nor MPI_Finalize, or not the latter; true if this process
// ran MPI and its report is to be written now.
void install_at_exit();
extern bool (*g_exit_hook)();

}  // namespace attrcheck::rt
