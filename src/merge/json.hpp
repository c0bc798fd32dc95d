// The report tools' view of JSON: nlohmann's ordered_json (a merged report keeps the key order
// a person reads: schema first), and accessors that never throw on a value of the wrong type
// (a report from a crashed rank, a hand-edited file or a fuzzer's mutation must give an error
// or a default, never an exception escaping or a crash).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace attrcheck::reports {

using Json = nlohmann::ordered_json;

// A report that cannot be used; the message names the file (and the position).
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// obj[key] if obj is an object holding key, else nullptr.
const Json* member(const Json& obj, const char* key);
// Python's truthiness: null, false, 0, "", [] and {} are false.
bool truthy(const Json* v);
inline bool truthy(const Json& obj, const char* key) { return truthy(member(obj, key)); }
// The string obj[key]; a missing key or null gives `fallback`, another type its Python text.
std::string text(const Json& obj, const char* key, const std::string& fallback = "");
// The integer obj[key] (a float within range is truncated), else `fallback`.
std::int64_t integer(const Json& obj, const char* key, std::int64_t fallback);
bool is_int(const Json* v);
// How Python prints a value in an f-string: None, True, 12, 'text' inside lists, [0, 1].
std::string py_str(const Json& v);
std::string py_repr(const Json& v);
// a + b, saturating (counts from a file can be anything).
std::int64_t add_sat(std::int64_t a, std::int64_t b);
// JSON text as attrcheck writes it: invalid UTF-8 in strings is replaced, never thrown on.
std::string dump(const Json& v, int indent = -1);

}  // namespace attrcheck::reports
