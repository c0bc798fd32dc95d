// attrcheck --probe-library: what the MPI library at hand answers to the probes, against its profile.
#pragma once

#include <string>
#include <vector>

namespace attrcheck::tools {

// Runs the probes under `launcher` (e.g. {"mpiexec", "-n"}; empty: the one the build recorded,
// else mpiexec), prints each answer beside the profile's (of the release series `against`, or
// else of the library's own version), and returns 0 if all agree, 1 if some differ, 2 if the
// probes could not run.
int probe_library(const std::vector<std::string>& launcher, const std::string& against);

}  // namespace attrcheck::tools
