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

// Once MPI runs: the report is named by rank (and spawned job) from now on; one written before
// MPI_Init (pid-N.json) moves, and the journal starts beside it.
void report_as_rank();
// Once MPI runs: the report is written on every exit path from then on (fatal signals, and an
// exit without MPI_Finalize).
void install_exit_paths();

}  // namespace attrcheck::rt
