// A report as the writer renders it, parsed (for the report and symbolization tests).
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "report/report.hpp"

namespace attrcheck {

// Renders through a temporary file and parses the result (throws, failing the test, on invalid JSON).
inline nlohmann::json render(const RunInfo& run, const FindingStore& store) {
  char path[] = "/tmp/attrcheck-report-test-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_TRUE(render_json(fd, run, store));
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return nlohmann::json::parse(text.str());
}

}  // namespace attrcheck
