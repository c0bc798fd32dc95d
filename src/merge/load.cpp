#include "merge/load.hpp"

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
  // Straight into the string (a merge reads hundreds of MiB): sized from the file, grown if it grows.
  std::size_t size = st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0;
  out.resize(size + 1);
  std::size_t done = 0;
  for (;;) {
    if (done == out.size()) out.resize(out.size() * 2 + 4096);
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw ReportError(path + ": " + std::strerror(e));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
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

// Where in text an error that nlohmann throws without a position (a number too large for a
// double) is: its SAX parser reports it with one.
struct ErrorAt : nlohmann::json_sax<Json> {
  std::size_t at = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    at = position > 0 ? position - 1 : 0;
    return false;
  }
};

std::size_t error_position(const std::string& text, std::size_t begin, std::size_t end) {
  ErrorAt sax;
  Json::sax_parse(text.begin() + static_cast<std::ptrdiff_t>(begin), text.begin() + static_cast<std::ptrdiff_t>(end), &sax);
  return begin + sax.at;
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
  std::int64_t gathered = 0;  // findings before this seq are in the job's gathered report
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
    if (const Json* g = member(entry, "gathered"); is_int(g)) j.gathered = std::max(j.gathered, g->get<std::int64_t>());
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
    // Written before the rank's findings went into the job's gathered report, with the count
    // handed to it (the merge adds nothing of it if that report holds the rank).
    if (entry["seq"].get<std::int64_t>() < journal.gathered && !member(f, "gathered_count"))
      f["gathered_count"] = integer(f, "count", 1);
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
    throw ReportError(path + ":" + position(body, error_position(body, 0, body.size())) + ": not valid JSON: " +
                      parse_message(e.what()));
  }
}

namespace {

void check_report(const std::string& path, const Json& data) {
  const Json* schema = member(data, "schema");
  if (schema == nullptr || !schema->is_string() || (*schema != kRankSchema && *schema != kMergedSchema))
    throw ReportError(path + ": not an attrcheck report (no 'schema': '" + kRankSchema + "' or '" +
                      kMergedSchema + "')");
  check_version(path, data);
  const Json* findings = member(data, "findings");
  if (findings == nullptr || !findings->is_array()) throw ReportError(path + ": 'findings' is missing or not a list");
  for (const Json& f : *findings)
    if (!f.is_object()) throw ReportError(path + ": a finding is not an object");
}

}  // namespace

Json load(const std::string& path) {
  if (ends_with(path, ".journal")) return load_journal(path);
  Json data = parse(path, read_file(path));
  check_report(path, data);
  const Json* schema = member(data, "schema");
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

std::vector<std::string> gathered_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    const char* n = e->d_name;
    if (::fnmatch("job-*.json", n, FNM_PERIOD) == 0 && ::fnmatch("job-*-rank-*.json", n, FNM_PERIOD) != 0)
      out.push_back(dir + "/" + n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

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
  for (const auto& f : gathered_files(dir)) doomed.insert(f);
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

namespace attrcheck::reports {

namespace {

bool space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::size_t skip_space(const std::string& t, std::size_t i) {
  while (i < t.size() && space(t[i])) ++i;
  return i;
}

constexpr std::size_t kBad = std::string::npos;

// The end of the string starting at t[i] == '"' (one past its closing quote), or kBad.
std::size_t skip_string(const std::string& t, std::size_t i) {
  const char* base = t.data();
  for (++i; i < t.size();) {
    const void* q = std::memchr(base + i, '"', t.size() - i);
    if (q == nullptr) return kBad;
    std::size_t at = static_cast<std::size_t>(static_cast<const char*>(q) - base);
    std::size_t slashes = 0;
    while (at - slashes > i && base[at - slashes - 1] == '\\') ++slashes;
    if (slashes % 2 == 0) return at + 1;
    i = at + 1;
  }
  return kBad;
}

// The end of the value starting at t[i]: brackets and strings only (nlohmann reads the value when
// it is needed and checks it then), or kBad when it is cut short or nests deeper than kMaxDepth.
std::size_t skip_value(const std::string& t, std::size_t i, int depth) {
  const int base = depth;
  if (i >= t.size()) return kBad;
  if (t[i] == '"') return skip_string(t, i);
  if (t[i] != '[' && t[i] != '{') {
    while (i < t.size() && t[i] != ',' && t[i] != ']' && t[i] != '}' && !space(t[i])) ++i;
    return i;
  }
  for (; i < t.size(); ++i) {
    char c = t[i];
    if (c == '"') {
      i = skip_string(t, i);
      if (i == kBad) return kBad;
      --i;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return kBad;
    } else if (c == ']' || c == '}') {
      if (--depth == base) return i + 1;
    }
  }
  return kBad;
}

// [begin, end) of the top-level object's "findings" and "stacks" arrays and of each of their
// elements, when the text has that shape; nothing otherwise (the text is then parsed whole).
struct Split {
  std::pair<std::size_t, std::size_t> findings{0, 0}, stacks{0, 0};
  std::vector<std::pair<std::size_t, std::size_t>> finding_elements, stack_elements;
};

bool split_elements(const std::string& t, std::size_t begin, std::size_t end,
                    std::vector<std::pair<std::size_t, std::size_t>>& elements) {
  elements.clear();
  for (std::size_t j = skip_space(t, begin + 1); j < end - 1;) {
    std::size_t e = skip_value(t, j, 2);
    if (e == kBad || e > end - 1) return false;
    elements.emplace_back(j, e);
    j = skip_space(t, e);
    if (j < end - 1 && t[j] == ',') j = skip_space(t, j + 1);
    else if (j != end - 1) return false;
  }
  return true;
}

bool find_arrays(const std::string& t, Split& out) {
  std::size_t i = skip_space(t, 0);
  if (i >= t.size() || t[i] != '{') return false;
  int found = 0;
  for (i = skip_space(t, i + 1); i < t.size();) {
    if (t[i] == '}') return found == 2 && skip_space(t, i + 1) == t.size();
    if (t[i] != '"') return false;
    std::size_t key_end = skip_string(t, i);
    if (key_end == kBad) return false;
    bool is_stacks = t.compare(i, key_end - i, "\"stacks\"") == 0;
    bool is_findings = t.compare(i, key_end - i, "\"findings\"") == 0;
    i = skip_space(t, key_end);
    if (i >= t.size() || t[i] != ':') return false;
    i = skip_space(t, i + 1);
    std::size_t end = skip_value(t, i, 1);
    if (end == kBad) return false;
    if (is_stacks || is_findings) {
      if (t[i] != '[' || (is_stacks ? out.stacks.second : out.findings.second) != 0) return false;  // one each
      ++found;
      (is_stacks ? out.stacks : out.findings) = {i, end};
      if (!split_elements(t, i, end, is_stacks ? out.stack_elements : out.finding_elements)) return false;
    }
    i = skip_space(t, end);
    if (i < t.size() && t[i] == ',') i = skip_space(t, i + 1);
    else if (i >= t.size() || t[i] != '}') return false;
  }
  return false;
}

}  // namespace

LazyStacks::LazyStacks(std::string path, std::string text, std::vector<std::pair<std::size_t, std::size_t>> elements)
    : path_(std::move(path)), text_(std::move(text)), elements_(std::move(elements)), parsed_(elements_.size()) {}

Json parse_range(const std::string& path, const std::string& text, std::size_t begin, std::size_t end) {
  try {
    return Json::parse(text.begin() + static_cast<std::ptrdiff_t>(begin), text.begin() + static_cast<std::ptrdiff_t>(end));
  } catch (const Json::parse_error& e) {
    std::size_t at = begin + (e.byte > 0 ? e.byte - 1 : 0);
    throw ReportError(path + ":" + position(text, at) + ": not valid JSON: " + parse_message(e.what()));
  } catch (const Json::exception& e) {
    throw ReportError(path + ":" + position(text, error_position(text, begin, end)) + ": not valid JSON: " +
                      parse_message(e.what()));
  }
}

Json LazyStacks::parse_range(std::size_t begin, std::size_t end) const {
  return reports::parse_range(path_, text_, begin, end);
}

const Json& LazyStacks::element(std::size_t index) {
  if (!parsed_[index]) {
    auto [begin, end] = elements_[index];
    parsed_[index] = std::make_unique<Json>(parse_range(begin, end));
  }
  return *parsed_[index];
}

const Json* LazyStacks::frames(std::int64_t id) {
  if (tolerate_) {
    try {
      tolerate_ = false;
      const Json* f = frames(id);
      tolerate_ = true;
      return f;
    } catch (const ReportError&) {
      tolerate_ = true;
      return nullptr;
    }
  }
  // attrcheck numbers a rank's stacks 1, 2, ... in order: try there first.
  if (id >= 1 && static_cast<std::size_t>(id) <= elements_.size()) {
    const Json& s = element(static_cast<std::size_t>(id - 1));
    if (const Json* sid = member(s, "id"); is_int(sid) && sid->get<std::int64_t>() == id) return member(s, "frames");
  }
  if (!indexed_) {
    indexed_ = true;
    for (std::size_t k = 0; k < elements_.size(); ++k)
      if (const Json* sid = member(element(k), "id"); is_int(sid)) by_id_.emplace_back(sid->get<std::int64_t>(), k);
  }
  for (const auto& [sid, k] : by_id_)
    if (sid == id) return member(element(k), "frames");
  return nullptr;
}

// The key and count of the finding at [begin, end) of body (fast_findings.cpp).
FindingKey scan_finding(const std::string& path, const std::string& body, std::size_t begin, std::size_t end);

Loaded load_for_merge(const std::string& path) {
  Loaded out;
  if (ends_with(path, ".journal") || exists(stem(path) + ".journal")) {
    out.data = load(path);
    return out;
  }
  std::string body = read_file(path);
  Split split;
  if (!find_arrays(body, split)) {
    out.data = parse(path, body);
    check_report(path, out.data);
    return out;
  }
  // Everything but the two arrays is parsed now (the run, the summary: small).
  auto [first, second] = split.findings.first < split.stacks.first ? std::make_pair(split.findings, split.stacks)
                                                                   : std::make_pair(split.stacks, split.findings);
  std::string rest = body.substr(0, first.first) + "[]" + body.substr(first.second, second.first - first.second) +
                     "[]" + body.substr(second.second);
  try {
    out.data = Json::parse(rest);
  } catch (const Json::exception&) {
    parse(path, body);  // the error, with its position in the file
    throw ReportError(path + ": not valid JSON");
  }
  check_report(path, out.data);
  if (text(out.data, "schema") != kRankSchema) {
    out.data = parse(path, body);  // a merged report: its findings and stacks are all needed
    check_report(path, out.data);
    return out;
  }
  out.findings.reserve(split.finding_elements.size());
  for (auto [begin, end] : split.finding_elements) out.findings.push_back(scan_finding(path, body, begin, end));
  out.split = true;
  out.stacks = std::make_unique<LazyStacks>(path, std::move(body), std::move(split.stack_elements));
  return out;
}

}  // namespace attrcheck::reports
