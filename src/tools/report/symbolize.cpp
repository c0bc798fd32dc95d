#include "report/symbolize.hpp"

#include "report/load.hpp"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <set>
#include <spawn.h>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>

extern char** environ;

namespace attrcheck::reports {

std::optional<std::string> capture(const std::vector<std::string>& argv) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return std::nullopt;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return std::nullopt;
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipefd[0]);
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return out;
}

namespace {

using Address = unsigned long long;

bool is_absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

// True for a non-PIE executable (ELF type EXEC), whose addresses are absolute.
bool fixed_address(const std::string& module, std::map<std::string, bool>& cache) {
  auto it = cache.find(module);
  if (it != cache.end()) return it->second;
  bool fixed = false;
  int fd = ::open(module.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    unsigned char head[18];
    if (::read(fd, head, sizeof head) == static_cast<ssize_t>(sizeof head))
      fixed = head[0] == 0x7f && head[1] == 'E' && head[2] == 'L' && head[3] == 'F' && head[16] == 2 && head[17] == 0;
    ::close(fd);
  }
  return cache[module] = fixed;
}

bool hex(const std::string& s, Address& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtoull(s.c_str(), &end, 16);
  return errno == 0 && end != s.c_str() && *end == '\0';
}

// (module, address for addr2line) of a frame or site, or nothing if it cannot be symbolized.
std::optional<std::pair<std::string, Address>> target(const Json& frame, std::map<std::string, bool>& elf) {
  std::string module = text(frame, "module"), offset = text(frame, "offset");
  if (module.empty() || offset.empty() || !is_absolute(module) || !exists(module)) return std::nullopt;
  std::string base = fixed_address(module, elf) ? text(frame, "address") : offset;
  Address a;
  if (!hex(base, a)) return std::nullopt;
  // A callback's entry address is its function as is. A return address: the call is the
  // instruction before it (at a function's entry, minus one would name the function before).
  if (!truthy(frame, "entry")) {
    if (a == 0) return std::nullopt;
    --a;
  }
  return std::make_pair(module, a);
}

struct Symbol {
  Address start, end;
  std::string name;
};

// The module's function symbols with a size, from its symbol table, or from its dynamic one when
// it is stripped (binutils' nm).
std::vector<Symbol> function_symbols(const std::string& module) {
  std::vector<Symbol> symbols;
  for (bool dynamic : {false, true}) {
    std::vector<std::string> argv = {"nm", "-S", "-C", "--defined-only"};
    if (dynamic) argv.push_back("-D");
    argv.push_back(module);
    auto out = capture(argv);
    if (!out) return {};
    std::size_t pos = 0;
    while (pos < out->size()) {
      std::size_t eol = out->find('\n', pos);
      if (eol == std::string::npos) eol = out->size();
      std::string line = out->substr(pos, eol - pos);
      pos = eol + 1;
      // "start size type name"
      std::vector<std::string> parts;
      std::size_t i = 0;
      while (parts.size() < 3 && i < line.size()) {
        while (i < line.size() && line[i] == ' ') ++i;
        std::size_t j = line.find(' ', i);
        if (j == std::string::npos) break;
        parts.push_back(line.substr(i, j - i));
        i = j + 1;
      }
      while (i < line.size() && line[i] == ' ') ++i;
      if (parts.size() != 3 || i >= line.size()) continue;
      if (parts[2].size() != 1 || std::string("TtWwi").find(parts[2][0]) == std::string::npos) continue;
      Address start, size;
      if (!hex(parts[0], start) || !hex(parts[1], size)) continue;
      symbols.push_back({start, start + size, line.substr(i)});
    }
    if (!symbols.empty()) break;
  }
  return symbols;
}

struct Where {
  std::string function, file;
  long long line = 0;
};

std::string trim(const std::string& s) {
  auto a = s.find_first_not_of(" \t\r");
  auto b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// One addr2line run over a module. Without debug information addr2line names the nearest symbol
// *before* an address, which in a stripped library is often another function (a static one's
// address gets the exported one before it): a name is kept only when that symbol's extent holds
// the address.
std::map<Address, Where> addr2line(const std::string& module, const std::set<Address>& addresses) {
  std::vector<std::string> argv = {"addr2line", "-f", "-C", "-e", module};
  char buf[32];
  for (Address a : addresses) {
    std::snprintf(buf, sizeof buf, "0x%llx", a);
    argv.emplace_back(buf);
  }
  std::map<Address, Where> result;
  auto out = capture(argv);
  if (!out) return result;
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos <= out->size()) {
    std::size_t eol = out->find('\n', pos);
    if (eol == std::string::npos) eol = out->size();
    lines.push_back(out->substr(pos, eol - pos));
    pos = eol + 1;
  }
  std::optional<std::vector<Symbol>> symbols;
  std::size_t i = 0;
  for (Address address : addresses) {
    if (2 * i + 1 >= lines.size()) break;
    std::string function = trim(lines[2 * i]);
    std::string where = trim(lines[2 * i + 1]);
    ++i;
    auto colon = where.rfind(':');
    std::string file = colon == std::string::npos ? "" : where.substr(0, colon);
    std::string rest = colon == std::string::npos ? where : where.substr(colon + 1);
    std::size_t digits = 0;
    while (digits < rest.size() && digits < 18 && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
    Where w;
    w.line = digits > 0 && file != "??" ? std::stoll(rest.substr(0, digits)) : 0;
    if (function == "??") function.clear();
    if (!function.empty() && (file == "??" || file.empty())) {  // named from a symbol table only
      if (!symbols) symbols = function_symbols(module);
      function.clear();
      for (const auto& s : *symbols)
        if (s.start <= address && address < s.end) {
          function = s.name;
          break;
        }
    }
    w.function = function;
    w.file = file == "??" ? "" : file;
    result[address] = w;
  }
  return result;
}

}  // namespace

void symbolize(Json& report) {
  if (truthy(report, "symbolized")) return;
  report["symbolized"] = true;
  std::vector<Json*> frames;
  auto take = [&frames](Json& frame) {
    // Symbolized in the process already (the runtime's own pass at MPI_Finalize): keep it.
    if (!frame.is_object() || truthy(frame, "symbolized") || member(frame, "function") != nullptr) return;
    frames.push_back(&frame);
  };
  if (auto f = report.find("findings"); f != report.end() && f->is_array())
    for (Json& finding : *f)
      if (auto s = finding.find("site"); finding.is_object() && s != finding.end() && truthy(&*s)) take(*s);
  if (auto st = report.find("stacks"); st != report.end() && st->is_array())
    for (Json& stack : *st)
      if (auto fr = stack.find("frames"); stack.is_object() && fr != stack.end() && fr->is_array())
        for (Json& frame : *fr) take(frame);
  std::map<std::string, bool> elf;
  std::map<std::string, std::set<Address>> wanted;
  std::vector<std::optional<std::pair<std::string, Address>>> targets;
  targets.reserve(frames.size());
  for (Json* frame : frames) {
    targets.push_back(target(*frame, elf));
    if (targets.back()) wanted[targets.back()->first].insert(targets.back()->second);
  }
  std::map<std::pair<std::string, Address>, Where> known;
  for (const auto& [module, addresses] : wanted)
    for (auto& [address, where] : addr2line(module, addresses)) known[{module, address}] = where;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (!targets[i]) continue;
    auto it = known.find(*targets[i]);
    if (it == known.end()) continue;
    Json& frame = *frames[i];
    if (!it->second.function.empty()) frame["function"] = it->second.function;
    if (!it->second.file.empty()) {
      frame["file"] = it->second.file;
      frame["line"] = it->second.line;
    }
  }
}

}  // namespace attrcheck::reports
