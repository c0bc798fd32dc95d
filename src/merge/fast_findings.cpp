// A rank report's findings as the merge first reads them: nlohmann's SAX parser over each
// finding's text, keeping only what makes it the same finding as another (rule, call, site
// module and offset, message) and its count. Building the whole value is left for the findings
// the merged report does not hold yet (after the first ranks: none), which keeps a merge of
// thousands of rank reports from allocating and freeing every finding of every rank.
#include "merge/load.hpp"

#include <cmath>
#include <cstdint>
#include <optional>

namespace attrcheck::reports {

namespace {

using Number = Json::number_integer_t;
using Unsigned = Json::number_unsigned_t;
using Float = Json::number_float_t;

struct KeyScanner {
  enum Field { None, Rule, Call, Message, Count, Site, Module, Offset, Whole };
  std::optional<std::string> rule, call, module, offset;
  std::string message;
  std::int64_t count = 1;
  bool whole = false;   // something the quick reading leaves to the whole parse
  bool object = true;   // the finding is an object
  int depth = 0;
  bool in_site = false;
  Field pending = None;

  std::optional<std::string>* slot(Field f) {
    switch (f) {
      case Rule: return &rule;
      case Call: return &call;
      case Module: return &module;
      case Offset: return &offset;
      default: return nullptr;
    }
  }
  bool first() {
    if (depth == 0) object = false;
    return object;
  }
  // A value of the wrong kind for a field the key uses: the whole parse decides.
  bool other() {
    if (!first()) return false;
    if (pending == Rule || pending == Call || pending == Message || pending == Module || pending == Offset) whole = true;
    if (pending == Count) count = 1;
    pending = None;
    return true;
  }
  bool null() {
    if (!first()) return false;
    if (auto* s = slot(pending)) s->reset();
    if (pending == Message) message.clear();
    if (pending == Count) count = 1;
    pending = None;
    return true;
  }
  bool boolean(bool) { return other(); }
  bool number_integer(Number v) {
    if (pending == Count) {
      count = v;
      pending = None;
      return first();
    }
    return other();
  }
  bool number_unsigned(Unsigned v) {
    if (pending == Count) {
      count = v > static_cast<Unsigned>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(v);
      pending = None;
      return first();
    }
    return other();
  }
  bool number_float(Float v, const std::string&) {
    if (pending == Count) {
      count = std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<std::int64_t>(v) : 1;
      pending = None;
      return first();
    }
    return other();
  }
  bool string(std::string& v) {
    if (!first()) return false;
    if (auto* s = slot(pending)) *s = std::move(v);
    else if (pending == Message) message = std::move(v);
    else if (pending == Count) count = 1;
    pending = None;
    return true;
  }
  bool binary(Json::binary_t&) { return other(); }
  bool start_object(std::size_t) {
    if (depth == 1 && pending == Site) in_site = true;
    else if (pending != None) other();
    pending = None;
    ++depth;
    return true;
  }
  bool key(std::string& k) {
    pending = None;
    if (depth == 1) {
      if (k == "rule") pending = Rule;
      else if (k == "call") pending = Call;
      else if (k == "message") pending = Message;
      else if (k == "count") pending = Count;
      else if (k == "site") {
        pending = Site;
        module.reset();  // a second "site" replaces the first, as in the whole parse
        offset.reset();
      } else if (k == "ranks" || k == "spawned_ranks") whole = true;  // a merged report's
      else if (k == "gathered_count") whole = true;  // the merge may add only part of its count
    } else if (depth == 2 && in_site) {
      if (k == "module") pending = Module;
      else if (k == "offset") pending = Offset;
      else if (k == "python") whole = true;  // made from Python: its Python frame is part of the key
    }
    return true;
  }
  bool end_object() {
    if (depth == 2 && in_site) in_site = false;
    --depth;
    return true;
  }
  bool start_array(std::size_t) {
    if (!first()) return false;
    other();
    ++depth;
    return true;
  }
  bool end_array() {
    --depth;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

void key_part(std::string& key, const std::optional<std::string>& v) {
  if (!v) {
    key += "\x01N";
    return;
  }
  key += "\x01S";
  key += *v;
}

// Addresses and handles differ between ranks (ASLR); module-relative offsets do not.
std::string without_hex(const std::string& m) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  std::string out;
  out.reserve(m.size());
  for (std::size_t i = 0; i < m.size();) {
    if (m[i] == '0' && i + 2 < m.size() && m[i + 1] == 'x' && hex(m[i + 2])) {
      out += "0x?";
      i += 2;
      while (i < m.size() && hex(m[i])) ++i;
    } else {
      out += m[i++];
    }
  }
  return out;
}

std::string make_key(const std::optional<std::string>& rule, const std::optional<std::string>& call,
                     const std::optional<std::string>& module, const std::optional<std::string>& offset,
                     const std::string& message) {
  std::string key;
  key_part(key, rule);
  key_part(key, call);
  key_part(key, module);
  key_part(key, offset);
  key += "\x01M" + without_hex(message);
  return key;
}

std::optional<std::string> value_text(const Json* v) {
  if (v == nullptr || v->is_null()) return std::nullopt;
  return v->is_string() ? v->get<std::string>() : dump(*v);
}

}  // namespace

std::string finding_key(const Json& f) {
  static const Json kEmpty = Json::object();
  const Json* site = member(f, "site");
  const Json& s = site && site->is_object() ? *site : kEmpty;
  std::string key = make_key(value_text(member(f, "rule")), value_text(member(f, "call")), value_text(member(s, "module")),
                             value_text(member(s, "offset")), text(f, "message"));
  // Every call from Python has the same native site (in the extension module): its innermost
  // Python frame tells them apart.
  if (const Json* py = member(s, "python"); py && py->is_object())
    key += "\x01P" + text(*py, "file") + ":" + value_text(member(*py, "line")).value_or("") + ":" + text(*py, "function");
  return key;
}

FindingKey scan_finding(const std::string& path, const std::string& body, std::size_t begin, std::size_t end) {
  FindingKey out;
  out.begin = begin;
  out.end = end;
  KeyScanner scan;
  bool ok = Json::sax_parse(body.begin() + static_cast<std::ptrdiff_t>(begin),
                            body.begin() + static_cast<std::ptrdiff_t>(end), &scan);
  if (!ok) {
    if (!scan.object) throw ReportError(path + ": a finding is not an object");
    parse_range(path, body, begin, end);  // the error, with its line and column
    throw ReportError(path + ": not valid JSON");
  }
  out.whole = scan.whole;
  out.count = scan.count;
  if (!out.whole) out.key = make_key(scan.rule, scan.call, scan.module, scan.offset, scan.message);
  return out;
}

}  // namespace attrcheck::reports
