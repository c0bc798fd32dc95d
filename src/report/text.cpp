// Bounded text (report.hpp): copy_str, Appender, and a rule's message template filled in from a
// finding's input. No allocation: usable in signal handlers.
#include "report/report.hpp"

#include <cstdint>
#include <cstring>

namespace attrcheck {

void copy_str(char* dst, std::size_t size, const char* src) noexcept {
  if (!size) return;
  std::size_t n = 0;
  if (src)
    for (; src[n] && n + 1 < size; ++n) dst[n] = src[n];
  dst[n] = '\0';
}

namespace {

void object_text(const FindingInput& in, Appender& a) noexcept {
  if (in.object_name && in.object_name[0]) {
    a.put(in.object_name);
    return;
  }
  a.put(to_string(in.kind));
  a.put(" ");
  a.hex(in.object);
}

}  // namespace

void Appender::put(const char* s) noexcept {
  if (!s) return;
  for (; *s && n + 1 < size; ++s) out[n++] = *s;
  if (size) out[n] = '\0';
}

void Appender::num(long long v) noexcept {
  char buf[24];
  int i = 0;
  unsigned long long u = v < 0 ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do buf[i++] = static_cast<char>('0' + u % 10);
  while ((u /= 10) && i < 22);
  if (v < 0) buf[i++] = '-';
  char rev[24];
  for (int j = 0; j < i; ++j) rev[j] = buf[i - 1 - j];
  rev[i] = '\0';
  put(rev);
}

namespace {
volatile bool g_keyvals_in_hex = false;  // (a plain flag: read from the signal path too)
}  // namespace

void set_keyvals_in_hex(bool hex) noexcept { g_keyvals_in_hex = hex; }

void Appender::keyval(long long v) noexcept {
  if (g_keyvals_in_hex) hex(static_cast<std::uint32_t>(v));
  else num(v);
}

void Appender::hex(unsigned long long v) noexcept {
  char buf[20] = "0x";
  int i = 2;
  bool started = false;
  for (int shift = 60; shift >= 0; shift -= 4) {
    const unsigned d = (v >> shift) & 0xF;
    if (d || started || shift == 0) {
      buf[i++] = "0123456789abcdef"[d];
      started = true;
    }
  }
  buf[i] = '\0';
  put(buf);
}

void expand_template(const char* tmpl, const FindingInput& in, char* out, std::size_t size) noexcept {
  Appender a{out, size};
  if (size) out[0] = '\0';
  for (const char* p = tmpl; p && *p;) {
    if (*p != '{') {
      const char one[2] = {*p++, '\0'};
      a.put(one);
      continue;
    }
    const char* end = std::strchr(p, '}');
    if (!end) {
      a.put(p);
      break;
    }
    const std::size_t len = static_cast<std::size_t>(end - p - 1);
    auto is = [&](const char* name) { return std::strlen(name) == len && std::strncmp(p + 1, name, len) == 0; };
    if (is("call")) {
      a.put(in.call ? in.call : "?");
    } else if (is("keyval")) {
      if (in.has_keyval) a.keyval(in.keyval);
      else a.put("?");
    } else if (is("object")) {
      object_text(in, a);
    } else if (is("detail")) {
      a.put(in.detail ? in.detail : "");
    } else if (is("replacement")) {
      a.put(in.replacement ? in.replacement : "the replacement");
    } else {
      a.put("{?}");
    }
    p = end + 1;
  }
}

}  // namespace attrcheck
