#include "merge/json.hpp"

#include <cmath>
#include <limits>

namespace attrcheck::reports {

const Json* member(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

bool truthy(const Json* v) {
  if (v == nullptr) return false;
  switch (v->type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return v->get<bool>();
    case Json::value_t::number_integer: return v->get<std::int64_t>() != 0;
    case Json::value_t::number_unsigned: return v->get<std::uint64_t>() != 0;
    case Json::value_t::number_float: return v->get<double>() != 0.0;
    case Json::value_t::string: return !v->get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !v->empty();
    default: return false;
  }
}

std::string text(const Json& obj, const char* key, const std::string& fallback) {
  const Json* v = member(obj, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (v->is_string()) return v->get_ref<const std::string&>();
  return py_str(*v);
}

bool is_int(const Json* v) { return v != nullptr && (v->is_number_integer()); }

std::int64_t integer(const Json& obj, const char* key, std::int64_t fallback) {
  const Json* v = member(obj, key);
  if (v == nullptr) return fallback;
  if (v->is_number_unsigned()) {
    auto u = v->get<std::uint64_t>();
    return u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
               ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(u);
  }
  if (v->is_number_integer()) return v->get<std::int64_t>();
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && std::fabs(d) < 9.2e18) return static_cast<std::int64_t>(d);
  }
  return fallback;
}

std::int64_t add_sat(std::int64_t a, std::int64_t b) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
  return r;
}

std::string dump(const Json& v, int indent) {
  return v.dump(indent, ' ', false, Json::error_handler_t::replace);
}

static std::string repr_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

static std::string py(const Json& v, bool top) {
  switch (v.type()) {
    case Json::value_t::null: return "None";
    case Json::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Json::value_t::string: return top ? v.get_ref<const std::string&>() : repr_string(v.get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        out += py(e, false);
      }
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + py(e, false);
      }
      return out + "}";
    }
    default: return dump(v);
  }
}

std::string py_str(const Json& v) { return py(v, true); }
std::string py_repr(const Json& v) { return py(v, false); }

}  // namespace attrcheck::reports
