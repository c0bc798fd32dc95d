// The job's report, gathered over MPI at MPI_Finalize: one file per job instead of one per rank.
//
// At MPI_Init the runtime makes its own communicators (a duplicate of MPI_COMM_WORLD, the ranks
// that share a node, and one rank per node), all with MPI_ERRORS_RETURN; the program's
// communicators, errhandlers and attributes are never used. At MPI_Finalize, once the program's
// own finalize work is done and while MPI still works, each rank hands its findings to its parent
// in a tree (k-nomial, fan-in 8), first within its node and then among the nodes; every parent merges them
// as the launcher's merge does (merge/merge.hpp), and world rank 0 writes the merged
// report (report.json, or job-ID.json for a spawned job). Then rank 0 tells every rank it
// merged, down the same tree, that its findings are in that file: those ranks write nothing.
//
// Nothing waits past a deadline (ATTRCHECK_GATHER_TIMEOUT seconds after the rank starts): a rank
// that never arrives (it exited without MPI_Finalize, or died) is left out, and a rank that is
// not told its findings are in the report writes its own report as without the gather (all of
// its findings, each with the count the gathered report may already hold for it: the merge adds
// only the rest). An MPI error in the gather is the same: the rank's own file, never the
// program's error. Not a public header.
#pragma once

namespace attrcheck::rt {

// At MPI_Init (after the runtime started): the communicators, unless the gather is off
// (ATTRCHECK_GATHER_TIMEOUT=0, mode off) or MPI was started without the runtime seeing it.
void prepare_gather() noexcept;
// Whether prepare_gather() made the communicators.
bool gather_prepared() noexcept;
// Gathers the job's findings (every rank calls it at MPI_Finalize, before the library's own
// finalize tears MPI down). True if this rank's findings are in the file rank 0 wrote: the
// store's findings are marked gathered then. False: the rank writes its own report.
bool gather_job_report() noexcept;

}  // namespace attrcheck::rt
