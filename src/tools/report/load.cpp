#include "report/load.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <map>
#include <set>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace attrcheck::reports {

std::string basename(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ReportError(path + ": " + std::strerror(errno));
  std::string out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw ReportError(path + ": " + std::strerror(EISDIR));
  }
  if (st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw ReportError(path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

namespace {

std::string position(const std::string& text, std::size_t offset) {
  offset = std::min(offset, text.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

// Where JSON text nests deeper than kMaxDepth (npos if nowhere): the parser itself is iterative,
// but copying and printing a value recurse.
std::size_t too_deep(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string::npos;
}

std::string parse_message(const char* what) {
  // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
  std::string m = what;
  auto column = m.find("column ");
  auto colon = column == std::string::npos ? m.find("] ") : m.find(": ", column);
  if (colon != std::string::npos) m = m.substr(colon + 2);
  return m;
}

void check_version(const std::string& path, const Json& data) {
  std::string version = text(data, "version", "");
  std::size_t digits = 0;
  while (digits < version.size() && version[digits] >= '0' && version[digits] <= '9') ++digits;
  auto dot = version.find('.');
  std::string major = version.substr(0, dot);
  if (major.empty() || digits != major.size() || major.size() > 9)
    throw ReportError(path + ": no valid schema version (got " + py_repr(Json(version)) + ")");
  if (std::stoi(major) != kSupportedMajor)
    throw ReportError(path + ": schema version " + version + " is not supported (this tool reads version " +
                      std::to_string(kSupportedMajor) + ".x)");
}

std::string stem(const std::string& path) {
  auto slash = path.rfind('/');
  auto dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
  return path.substr(0, dot);
}

struct Journal {
  Json header;
  std::vector<Json> entries;  // by seq, each seq once
};

Journal journal_lines(const std::string& path) {
  std::string body = read_file(path);
  Journal j;
  std::size_t end = body.find('\n');
  std::string first = body.substr(0, end);
  try {
    if (too_deep(first) != std::string::npos) throw ReportError(path + ":1: not a valid journal header: nesting too deep");
    j.header = Json::parse(first);
  } catch (const Json::exception& e) {
    throw ReportError(path + ":1: not a valid journal header: " + parse_message(e.what()));
  }
  const Json* schema = member(j.header, "schema");
  if (!j.header.is_object() || schema == nullptr || !schema->is_string() || *schema != kJournalSchema)
    throw ReportError(path + ": not an attrcheck journal (no 'schema': '" + kJournalSchema + "')");
  check_version(path, j.header);
  std::map<std::int64_t, Json> by_seq;
  while (end != std::string::npos) {
    std::size_t start = end + 1;
    end = body.find('\n', start);
    std::string line = body.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (line.empty() || too_deep(line) != std::string::npos) continue;
    Json entry = Json::parse(line, nullptr, false);  // a line cut short by the rank's death: left out
    if (entry.is_discarded() || !entry.is_object()) continue;
    const Json* seq = member(entry, "seq");
    const Json* finding = member(entry, "finding");
    if (!is_int(seq) || finding == nullptr || !finding->is_object()) continue;
    by_seq.emplace(seq->get<std::int64_t>(), std::move(entry));
  }
  for (auto& [seq, entry] : by_seq) j.entries.push_back(std::move(entry));
  return j;
}

// Appends the journal's findings from first_seq on (-1: those past the report's own),
// renumbering their stacks into the report's.
void add_journal(Json& data, const Journal& journal, std::int64_t first_seq) {
  Json& findings = data["findings"];
  std::int64_t start = first_seq < 0 ? static_cast<std::int64_t>(findings.size()) : first_seq;
  if (!member(data, "stacks") || !data["stacks"].is_array()) data["stacks"] = Json::array();
  Json& stacks = data["stacks"];
  std::int64_t next_id = 0;
  for (const auto& s : stacks) next_id = std::max(next_id, integer(s, "id", 0));
  ++next_id;
  Json rank = nullptr;
  if (const Json* run = member(data, "run"); run != nullptr) {
    if (const Json* r = member(*run, "rank"); r != nullptr) rank = *r;
  }
  for (const Json& entry : journal.entries) {
    if (entry["seq"].get<std::int64_t>() < start) continue;
    std::map<std::int64_t, std::int64_t> ids;
    if (const Json* es = member(entry, "stacks"); es != nullptr && es->is_array()) {
      for (const Json& s : *es) {
        if (const Json* id = member(s, "id"); is_int(id)) ids[id->get<std::int64_t>()] = next_id;
        const Json* frames = member(s, "frames");
        stacks.push_back(Json{{"id", next_id}, {"frames", frames ? *frames : Json::array()}});
        ++next_id;
      }
    }
    auto repoint = [&ids](Json& d) {
      if (const Json* st = member(d, "stack"); is_int(st)) {
        auto it = ids.find(st->get<std::int64_t>());
        if (it != ids.end()) d["stack"] = it->second;
      }
    };
    Json f = entry["finding"];
    f["rank"] = rank;
    repoint(f);
    if (Json* prov = f.contains("provenance") ? &f["provenance"] : nullptr; prov && prov->is_array()) {
      for (Json& p : *prov)
        if (p.is_object()) repoint(p);
    }
    findings.push_back(std::move(f));
  }
}

}  // namespace

Json parse(const std::string& path, const std::string& body) {
  if (auto at = too_deep(body); at != std::string::npos)
    throw ReportError(path + ":" + position(body, at) + ": not valid JSON: nested deeper than " +
                      std::to_string(kMaxDepth) + " levels");
  try {
    return Json::parse(body);
  } catch (const Json::parse_error& e) {
    std::size_t at = e.byte > 0 ? e.byte - 1 : 0;
    throw ReportError(path + ":" + position(body, at) + ": not valid JSON: " + parse_message(e.what()));
  } catch (const Json::exception& e) {  // e.g. a number too large for a double
    throw ReportError(path + ": not valid JSON: " + parse_message(e.what()));
  }
}

Json load(const std::string& path) {
  if (ends_with(path, ".journal")) return load_journal(path);
  Json data = parse(path, read_file(path));
  const Json* schema = member(data, "schema");
  if (schema == nullptr || !schema->is_string() || (*schema != kRankSchema && *schema != kMergedSchema))
    throw ReportError(path + ": not an attrcheck report (no 'schema': '" + kRankSchema + "' or '" +
                      kMergedSchema + "')");
  check_version(path, data);
  const Json* findings = member(data, "findings");
  if (findings == nullptr || !findings->is_array()) throw ReportError(path + ": 'findings' is missing or not a list");
  for (const Json& f : *findings)
    if (!f.is_object()) throw ReportError(path + ": a finding is not an object");
  std::string journal = stem(path) + ".journal";
  if (*schema == kRankSchema && exists(journal)) add_journal(data, journal_lines(journal), -1);
  return data;
}

Json load_journal(const std::string& path) {
  Journal j = journal_lines(path);
  Json run = Json::object();
  if (const Json* r = member(j.header, "run"); r && r->is_object()) run = *r;
  run["status"] = "running";
  run["signal"] = 0;
  const Json* version = member(j.header, "version");
  const Json* tool = member(j.header, "tool");
  Json data = {{"schema", kRankSchema}, {"version", version ? *version : Json()},
               {"tool", tool ? *tool : Json::object()}, {"run", run},
               {"findings", Json::array()}, {"stacks", Json::array()}};
  add_journal(data, j, 0);
  Json summary = Json::object();
  for (const char* s : {"error", "warning", "info"}) {
    std::int64_t n = 0;
    for (const Json& f : data["findings"])
      if (text(f, "severity") == s) n = add_sat(n, integer(f, "count", 1));
    summary[s] = n;
  }
  summary["dropped"] = 0;
  data["summary"] = summary;
  return data;
}

namespace {

// How a process names its files: rank-N (the job the user started), job-ID-rank-N (jobs started
// by MPI_Comm_spawn), pid-N (before MPI_Init).
std::vector<std::string> process_files(const std::string& dir, const char* extension) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const char* pattern : {"rank-*", "job-*-rank-*", "pid-*"}) {
    std::string glob = std::string(pattern) + extension;
    for (const auto& n : names)
      if (::fnmatch(glob.c_str(), n.c_str(), FNM_PERIOD) == 0) out.push_back(dir + "/" + n);
  }
  return out;
}

}  // namespace

std::vector<std::string> journal_files(const std::string& dir) { return process_files(dir, ".journal"); }

std::vector<std::string> rank_files(const std::string& dir) {
  std::vector<std::string> files = process_files(dir, ".json");
  std::set<std::string> reported;
  for (const auto& f : files) reported.insert(stem(f));
  for (const auto& j : journal_files(dir))
    if (!reported.count(stem(j))) files.push_back(j);
  auto order = [](const std::string& p) {
    std::string name = basename(p);
    int kind = name.rfind("rank-", 0) == 0 ? 0 : name.rfind("job-", 0) == 0 ? 1 : 2;
    std::string base = name.substr(0, name.rfind('.'));
    auto dash = base.rfind('-');
    std::string job = dash == std::string::npos ? "" : base.substr(0, dash);
    std::string num = dash == std::string::npos ? base : base.substr(dash + 1);
    bool digits = !num.empty() && num.size() < 18 && num.find_first_not_of("0123456789") == std::string::npos;
    return std::make_tuple(kind, kind == 1 ? job : std::string(), digits ? std::stoll(num) : 0LL);
  };
  std::stable_sort(files.begin(), files.end(),
                   [&order](const std::string& a, const std::string& b) { return order(a) < order(b); });
  return files;
}

void clean(const std::string& dir) {
  std::set<std::string> doomed;
  for (const auto& f : rank_files(dir)) doomed.insert(f);
  for (const auto& f : journal_files(dir)) doomed.insert(f);
  if (DIR* d = ::opendir(dir.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 6 && n[0] == '.' && ends_with(n, ".done")) doomed.insert(dir + "/" + n);
    }
    ::closedir(d);
  }
  for (const auto& f : doomed) ::unlink(f.c_str());
}

}  // namespace attrcheck::reports
