#include "tools/report/outputs.hpp"

namespace attrcheck::reports {

namespace {
#include "report_template.inc"  // kTemplate: reports/report-template.html, compiled in
}  // namespace

std::string html(const Json& report) {
  // Embedded as JSON in a script element: "</" must not end it early.
  std::string data = dump(report);
  std::string safe;
  safe.reserve(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] == '<' && i + 1 < data.size() && data[i + 1] == '/') safe += "<\\";
    else safe += data[i];
  }
  std::string page = kTemplate;
  const std::string marker = "/*ATTRCHECK_DATA*/";
  auto at = page.find(marker);
  if (at != std::string::npos) page.replace(at, marker.size(), safe);
  return page;
}

}  // namespace attrcheck::reports
