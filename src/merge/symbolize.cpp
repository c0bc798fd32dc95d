#include "merge/symbolize.hpp"

#include "merge/load.hpp"

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <set>
#include <spawn.h>
#include <system_error>
#include <thread>
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

// What symbolizing a module takes, from its ELF headers: whether its addresses are absolute (a
// non-PIE executable, ELF type EXEC), whether it has DWARF (.debug_info: addr2line names
// function, file and line) and whether it has a full symbol table (.symtab; else only the dynamic
// one, nm -D).
struct ElfInfo {
  bool fixed = false, debug_info = false, symtab = false;
};

ElfInfo elf_info(const std::string& module, std::map<std::string, ElfInfo>& cache) {
  auto it = cache.find(module);
  if (it != cache.end()) return it->second;
  ElfInfo info;
  int fd = ::open(module.c_str(), O_RDONLY | O_CLOEXEC);
  // Only the headers and the few small sections that say where the debug information is.
  auto read_at = [fd](std::uint64_t offset, std::uint64_t size) {
    std::string out(static_cast<std::size_t>(std::min<std::uint64_t>(size, 1 << 24)), '\0');
    ssize_t n = fd < 0 ? -1 : ::pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
  };
  auto num = [](const std::string& b, std::size_t at, int bytes) {
    std::uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; --k)
      v = v << 8 | (at + static_cast<std::size_t>(k) < b.size() ? static_cast<unsigned char>(b[at + static_cast<std::size_t>(k)]) : 0u);
    return v;
  };
  std::string head = read_at(0, 64);
  // ELF64, little-endian (x86-64, aarch64): the only modules this build's runtime records.
  if (head.size() == 64 && head.compare(0, 4, "\x7f" "ELF") == 0 && head[4] == 2 && head[5] == 1) {
    info.fixed = num(head, 16, 2) == 2;
    std::uint64_t shoff = num(head, 0x28, 8), shentsize = num(head, 0x3a, 2), shnum = num(head, 0x3c, 2),
                  shstrndx = num(head, 0x3e, 2);
    std::string table = shentsize >= 64 && shstrndx < shnum ? read_at(shoff, shnum * shentsize) : std::string();
    if (table.size() == shnum * shentsize && !table.empty()) {
      auto field = [&](std::uint64_t k, std::size_t at, int bytes) {
        return num(table, static_cast<std::size_t>(k * shentsize) + at, bytes);
      };
      std::string names = read_at(field(shstrndx, 0x18, 8), field(shstrndx, 0x20, 8));
      for (std::uint64_t k = 0; k < shnum; ++k) {
        std::uint64_t type = field(k, 4, 4), offset = field(k, 0x18, 8), size = field(k, 0x20, 8), name = field(k, 0, 4);
        if (type == 2 && size > 0) info.symtab = true;  // SHT_SYMTAB
        if (name >= names.size()) continue;
        std::string section = names.c_str() + name;
        if (section == ".debug_info") info.debug_info = true;
        // Separate debug information (Debian's -dbg / -dbgsym packages): by build id, or by the
        // debug link's name where gdb and addr2line look for it.
        if (section == ".note.gnu.build-id" && size > 16 && size < 4096) {
          std::string data = read_at(offset, size);
          std::size_t desc = 12 + ((static_cast<std::size_t>(num(data, 0, 4)) + 3) & ~std::size_t{3});
          std::string id;
          char b[3];
          for (std::size_t j = desc; j < data.size(); ++j) {
            std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(data[j]));
            id += b;
          }
          if (id.size() > 2 && exists("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug"))
            info.debug_info = true;
        }
        if (section == ".gnu_debuglink" && size < 4096) {
          std::string link = read_at(offset, size).c_str();
          std::string dir = module.substr(0, module.rfind('/'));
          for (const std::string& candidate : {"/usr/lib/debug" + dir + "/" + link, dir + "/.debug/" + link})
            if (!link.empty() && exists(candidate)) info.debug_info = true;
        }
      }
    }
  }
  if (fd >= 0) ::close(fd);
  return cache[module] = info;
}

bool hex(const std::string& s, Address& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtoull(s.c_str(), &end, 16);
  return errno == 0 && end != s.c_str() && *end == '\0';
}

// (module, address for addr2line) of a frame or site, or nothing if it cannot be symbolized.
std::optional<std::pair<std::string, Address>> target(const Json& frame, std::map<std::string, ElfInfo>& elf) {
  std::string module = text(frame, "module"), offset = text(frame, "offset");
  if (module.empty() || offset.empty() || !is_absolute(module) || !exists(module)) return std::nullopt;
  std::string base = elf_info(module, elf).fixed ? text(frame, "address") : offset;
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
std::vector<Symbol> function_symbols(const std::string& module, const ElfInfo& info) {
  std::vector<Symbol> symbols;
  for (bool dynamic : {false, true}) {
    if (!dynamic && !info.symtab) continue;
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
std::map<Address, Where> addr2line(const std::string& module, const std::set<Address>& addresses,
                                   const ElfInfo& info) {
  std::map<Address, Where> result;
  if (!info.debug_info) {
    // No DWARF: addr2line could only name the nearest symbol before each address, which is kept
    // only when that symbol's extent holds the address. Ask the symbol table directly.
    std::vector<Symbol> symbols = function_symbols(module, info);
    for (Address address : addresses) {
      Where w;
      for (const auto& s : symbols)
        if (s.start <= address && address < s.end) {
          w.function = s.name;
          break;
        }
      result[address] = w;
    }
    return result;
  }
  std::vector<std::string> argv = {"addr2line", "-f", "-C", "-e", module};
  char buf[32];
  for (Address a : addresses) {
    std::snprintf(buf, sizeof buf, "0x%llx", a);
    argv.emplace_back(buf);
  }
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
      if (!symbols) symbols = function_symbols(module, info);
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
  std::map<std::string, ElfInfo> elf;
  std::map<std::string, std::set<Address>> wanted;
  std::vector<std::optional<std::pair<std::string, Address>>> targets;
  targets.reserve(frames.size());
  for (Json* frame : frames) {
    targets.push_back(target(*frame, elf));
    if (targets.back()) wanted[targets.back()->first].insert(targets.back()->second);
  }
  // One addr2line (or nm) per module, all at once: each waits mostly on its own file.
  std::vector<std::pair<const std::string*, const std::set<Address>*>> jobs;
  for (const auto& [module, addresses] : wanted) jobs.emplace_back(&module, &addresses);
  std::vector<std::map<Address, Where>> found(jobs.size());
  std::vector<std::thread> threads;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const ElfInfo& info = elf[*jobs[j].first];
    auto work = [&found, &jobs, &info, j] { found[j] = addr2line(*jobs[j].first, *jobs[j].second, info); };
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      work();  // no thread to be had: one after the other
    }
  }
  for (auto& t : threads) t.join();
  std::map<std::pair<std::string, Address>, Where> known;
  for (std::size_t j = 0; j < jobs.size(); ++j)
    for (auto& [address, where] : found[j]) known[{*jobs[j].first, address}] = where;
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
