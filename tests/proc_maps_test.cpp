// The /proc/self/maps reader: every line parsed as a plain reference parse reads it, wherever the
// reads split the lines; overlong lines skipped without disturbing the next; the visit's stop.
#include "attrcheck/proc_maps.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Seen {
  std::uintptr_t start, end;
  std::uint64_t offset;
  std::string path;
};
bool operator==(const Seen& a, const Seen& b) {
  return a.start == b.start && a.end == b.end && a.offset == b.offset && a.path == b.path;
}
std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << std::hex << s.start << '-' << s.end << ' ' << s.offset << std::dec << " '" << s.path << "'";
}

std::vector<Seen> read_all(int fd, std::size_t stop_after = SIZE_MAX) {
  struct Ctx {
    std::vector<Seen> seen;
    std::size_t stop_after;
  } ctx{{}, stop_after};
  attrcheck::for_each_mapping_in(fd, [](void* c, const attrcheck::Mapping& m) {
    auto& x = *static_cast<Ctx*>(c);
    x.seen.push_back({m.start, m.end, m.file_offset, m.path});
    return x.seen.size() < x.stop_after;
  }, &ctx);
  return ctx.seen;
}

// Lines of varied lengths (so they cross every read's end somewhere), some anonymous, one path
// longer than the reader's line buffer; and what each well-formed one should read as.
std::string make_maps(std::vector<Seen>* expect, std::size_t lines, unsigned seed) {
  std::mt19937 rng(seed);
  std::string text;
  std::uintptr_t at = 0x400000;
  for (std::size_t i = 0; i < lines; ++i) {
    const std::uintptr_t len = 0x1000 * (1 + rng() % 64);
    const std::uint64_t off = 0x1000 * (rng() % 16);
    std::string path;
    const unsigned shape = rng() % 8;
    if (shape == 0) {
      path = "";
    } else if (shape == 1) {
      path = "[stack]";
    } else {
      path = "/usr/lib/x86_64-linux-gnu/lib" + std::string(rng() % 120, static_cast<char>('a' + i % 26)) + ".so";
    }
    const bool overlong = i % 97 == 50;
    if (overlong) path = "/" + std::string(5000 + rng() % 3000, 'z');
    char head[128];
    std::snprintf(head, sizeof head, "%" PRIxPTR "-%" PRIxPTR " r-xp %08" PRIx64 " fd:01 %u", at, at + len, off,
                  static_cast<unsigned>(rng() % 100000));
    text += head;
    if (!path.empty()) text += std::string(1 + rng() % 20, ' ') + path;
    text += '\n';
    if (!overlong) expect->push_back({at, at + len, off, path});
    at += len + 0x1000;
  }
  return text;
}

int file_with(const std::string& text) {
  char name[] = "/tmp/attrcheck_maps_XXXXXX";
  const int fd = ::mkstemp(name);
  EXPECT_GE(fd, 0);
  ::unlink(name);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::lseek(fd, 0, SEEK_SET);
  return fd;
}

TEST(ProcMaps, ReadsEveryLineOfAFileAsAPlainParse) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    std::vector<Seen> expect;
    const std::string text = make_maps(&expect, 400, seed);
    const int fd = file_with(text);
    EXPECT_EQ(read_all(fd), expect) << "seed " << seed;
    ::close(fd);
  }
}

// A pipe written in pieces of a few bytes: the reader's reads end anywhere in a line.
TEST(ProcMaps, ReadsLinesSplitAnywhereBetweenReads) {
  std::vector<Seen> expect;
  const std::string text = make_maps(&expect, 300, 42);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([&] {
    std::mt19937 rng(7);
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t n = std::min<std::size_t>(1 + rng() % 13, text.size() - at);
      ASSERT_EQ(::write(fds[1], text.data() + at, n), static_cast<ssize_t>(n));
      at += n;
      if (rng() % 4 == 0) std::this_thread::yield();
    }
    ::close(fds[1]);
  });
  const std::vector<Seen> seen = read_all(fds[0]);
  writer.join();
  ::close(fds[0]);
  EXPECT_EQ(seen, expect);
}

TEST(ProcMaps, AnOverlongLineSplitBetweenReadsIsSkippedAlone) {
  // The overlong path begins in one read and ends in a later one; the line after it is whole.
  const std::string text = "1000-2000 r-xp 00000000 fd:01 1 /a\n3000-4000 r--p 00001000 fd:01 2 /" +
                           std::string(9000, 'q') + "\n5000-6000 rw-p 00000000 00:00 0 \n7000-8000 r-xp 0 fd:01 3 /b\n";
  const int fd = file_with(text);
  const std::vector<Seen> expect{{0x1000, 0x2000, 0, "/a"}, {0x5000, 0x6000, 0, ""}, {0x7000, 0x8000, 0, "/b"}};
  EXPECT_EQ(read_all(fd), expect);
  ::close(fd);
}

TEST(ProcMaps, StopsWhenTheVisitSaysSo) {
  std::vector<Seen> expect;
  const std::string text = make_maps(&expect, 100, 3);
  const int fd = file_with(text);
  const std::vector<Seen> seen = read_all(fd, 10);
  ::close(fd);
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen, std::vector<Seen>(expect.begin(), expect.begin() + 10));
}

TEST(ProcMaps, FindsThisThreadsStackAndThisCodeInTheProcess) {
  int local = 0;
  struct Find {
    std::uintptr_t stack, code;
    bool stack_found, code_found;
  } f{reinterpret_cast<std::uintptr_t>(&local), reinterpret_cast<std::uintptr_t>(&read_all), false, false};
  ASSERT_TRUE(attrcheck::for_each_mapping([](void* c, const attrcheck::Mapping& m) {
    auto& x = *static_cast<Find*>(c);
    if (m.start <= x.stack && x.stack < m.end) x.stack_found = std::string(m.path) == "[stack]";
    if (m.start <= x.code && x.code < m.end) x.code_found = std::string(m.path).find("proc_maps_test") != std::string::npos;
    return true;
  }, &f));
  EXPECT_TRUE(f.stack_found);
  EXPECT_TRUE(f.code_found);
}

}  // namespace
