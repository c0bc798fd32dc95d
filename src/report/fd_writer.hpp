// Buffered JSON and text output to a file descriptor with write(2): no allocation, so that a
// report can be rendered from a fatal-signal handler (report.hpp).
#pragma once

#include "report/report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace attrcheck {

class FdWriter {
 public:
  explicit FdWriter(int fd) noexcept : fd_(fd) {}
  ~FdWriter() { flush(); }
  bool ok() const noexcept { return ok_; }
  void raw(const char* s) noexcept {
    if (!s) return;
    while (*s) byte(*s++);
  }
  void str(const char* s) noexcept {  // a JSON string literal
    byte('"');
    for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s ? s : ""); *p; ++p) {
      const unsigned char c = *p;
      if (c == '"' || c == '\\') {
        byte('\\');
        byte(static_cast<char>(c));
      } else if (c < 0x20) {
        raw("\\u00");
        byte("0123456789abcdef"[c >> 4]);
        byte("0123456789abcdef"[c & 15]);
      } else {
        byte(static_cast<char>(c));
      }
    }
    byte('"');
  }
  void num(long long v) noexcept {
    char buf[32];
    Appender a{buf, sizeof buf};
    a.num(v);
    raw(buf);
  }
  void hex(unsigned long long v) noexcept {
    char buf[32];
    Appender a{buf, sizeof buf};
    a.hex(v);
    str(buf);
  }
  void key(const char* k) noexcept {
    str(k);
    byte(':');
  }
  void flush() noexcept {
    std::size_t off = 0;
    while (off < n_) {
      const ssize_t w = ::write(fd_, buf_ + off, n_ - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        ok_ = false;
        break;
      }
      off += static_cast<std::size_t>(w);
    }
    n_ = 0;
  }

 private:
  void byte(char c) noexcept {
    if (n_ == sizeof buf_) flush();
    buf_[n_++] = c;
  }
  int fd_;
  bool ok_ = true;
  std::size_t n_ = 0;
  char buf_[4096];
};

}  // namespace attrcheck
