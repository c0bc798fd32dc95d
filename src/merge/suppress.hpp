// Suppressions: a file of lines "RULE_GLOB KIND:GLOB" (# comments, blank lines ignored), where
// KIND is fun (a function in the finding's frames), lib (a module path in them), src (a source
// file in them), at (a frame's module path + offset, for stripped libraries) or keyval (how the
// finding's keyval was made, "copy=C,delete=D,extra_state=E": its keyval_callbacks), e.g.
//     keyval.leak     fun:PetscInitialize*
//     deprecated.*    lib:*/libhdf5*.so*
//     attr.leak       src:*/vendor/*
//     attr.world-at-finalize  at:*/mpi4py/MPI.cpython-311-x86_64-linux-gnu.so+0x706ec
//     attr.world-at-finalize  keyval:copy=MPI_COMM_NULL_COPY_FN,delete=*/mpi4py/MPI.*.so+*,extra_state=0x0
// A finding's frames are its site, its stack and its provenance stacks. A finding whose rule
// matches and one of whose frames (for keyval: whose keyval) matches is suppressed: moved to the
// report's "suppressed" list with its count and the line that matched. The default suppressions (lib/attrcheck/default.supp)
// apply unless the user turns them off.
#pragma once

#include "merge/json.hpp"

#include <string>
#include <vector>

namespace attrcheck::reports {

struct Suppression {
  std::string rule, kind, pattern, origin;  // origin: "FILE:LINE"
  bool by_default = false;
};

// Parses a suppressions file; a malformed line is a ReportError naming the file and line.
std::vector<Suppression> load_suppressions(const std::string& path, bool by_default = false);
// The suppressions shipped with attrcheck, next to the programs (none if the file is missing).
std::vector<Suppression> default_suppressions();
// Moves matching findings to report["suppressed"] and recounts the summary. Symbolize first.
void suppress(Json& report, const std::vector<Suppression>& suppressions);

// The installation's directory of data files (PREFIX/lib/attrcheck), from the running program.
std::string data_dir();

}  // namespace attrcheck::reports
