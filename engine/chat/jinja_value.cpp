#include "engine/chat/jinja_value.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "engine/common/json_string.h"

namespace rose::jinja {

namespace {
thread_local WorkMeter* active_meter = nullptr;
thread_local int nesting = 0;

// Values can nest without bound at run time ({% set x = [x] %} in a loop): recursive walks stop
// at this depth instead of overflowing the stack.
constexpr int kMaxValueNesting = 200;
struct NestingGuard {
  NestingGuard() {
    if (++nesting > kMaxValueNesting) {
      --nesting;
      throw EvalError(fmt::format("value nested deeper than {} levels", kMaxValueNesting));
    }
  }
  ~NestingGuard() { --nesting; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
};
}  // namespace

WorkMeter::WorkMeter(int64_t max_units) : limit(max_units), previous_(active_meter) {
  active_meter = this;
}
WorkMeter::~WorkMeter() { active_meter = previous_; }

void charge_work(int64_t units) {
  if (!active_meter) return;
  active_meter->used += units;
  if (active_meter->used > active_meter->limit)
    throw EvalError(
        fmt::format("render step limit ({} steps) exceeded: a runaway loop?", active_meter->limit));
}

double Value::as_number() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return std::get<double>(data);
}

Value CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return positional[index];
  if (const Value* v = dict_find(keyword, name)) return *v;
  return Value::undefined(std::string(name));
}

const Value* dict_find(const ValueDict& dict, std::string_view key) {
  for (const auto& [k, v] : dict)
    if (k == key) return &v;
  return nullptr;
}

const char* type_name(const Value& v) {
  if (v.is_undefined()) return "Undefined";
  if (v.is_none()) return "NoneType";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "str";
  if (v.is_list()) return "list";
  if (v.is_dict()) return "dict";
  if (v.is_namespace()) return "Namespace";
  return "function";
}

bool truthy(const Value& v) {
  if (v.is_undefined() || v.is_none()) return false;
  if (v.is_bool()) return v.as_bool();
  if (v.is_int()) return v.as_int() != 0;
  if (v.is_float()) return v.as_number() != 0.0;
  if (v.is_string()) return !v.as_string().empty();
  if (v.is_list()) return !v.as_list().empty();
  if (v.is_dict()) return !v.as_dict().empty();
  return true;
}

bool values_equal(const Value& a, const Value& b) {
  NestingGuard guard;
  // Python: True == 1 and 1 == 1.0.
  bool a_numeric = a.is_number() || a.is_bool(), b_numeric = b.is_number() || b.is_bool();
  if (a_numeric && b_numeric) {
    if (!a.is_float() && !b.is_float())
      return a.as_number() == b.as_number() &&
             (a.is_bool() ? int64_t{a.as_bool()} : a.as_int()) ==
                 (b.is_bool() ? int64_t{b.as_bool()} : b.as_int());
    return a.as_number() == b.as_number();
  }
  if (a.data.index() != b.data.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.as_string() == b.as_string();
  if (a.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    charge_work(static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i)
      if (!values_equal(x[i], y[i])) return false;
    return true;
  }
  if (a.is_dict()) {
    const auto &x = a.as_dict(), &y = b.as_dict();
    if (x.size() != y.size()) return false;
    for (const auto& [k, v] : x) {
      const Value* other = dict_find(y, k);
      if (!other || !values_equal(v, *other)) return false;
    }
    return true;
  }
  if (a.is_callable()) return &a.as_callable() == &b.as_callable();
  return &a.as_namespace() == &b.as_namespace();
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string digits(buf, end);
  // Python's repr: shortest round-trip digits, positional for 1e-4 <= |d| < 1e16, ".0" when
  // integral.
  double magnitude = std::fabs(d);
  if (magnitude != 0.0 && (magnitude < 1e-4 || magnitude >= 1e16)) {
    auto [e_end, e_ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string s(buf, e_end);
    size_t e = s.find('e');
    std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
    char sign = exponent[0] == '-' ? '-' : '+';
    size_t first = exponent.find_first_not_of("+-0");
    std::string exp_digits = first == std::string::npos ? "0" : exponent.substr(first);
    if (exp_digits.size() < 2) exp_digits = "0" + exp_digits;
    return mantissa + "e" + sign + exp_digits;
  }
  auto [f_end, f_ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  std::string fixed(buf, f_end);
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

static std::string repr_string(const std::string& s) {
  char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == static_cast<unsigned char>(quote))
      out += std::string("\\") + quote;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out + quote;
}

std::string python_repr(const Value& v) {
  NestingGuard guard;
  if (v.is_list()) charge_work(static_cast<int64_t>(v.as_list().size()));
  if (v.is_dict()) charge_work(static_cast<int64_t>(v.as_dict().size()));
  if (v.is_string()) return repr_string(v.as_string());
  if (v.is_list()) {
    std::string out = "[";
    for (size_t i = 0; i < v.as_list().size(); ++i)
      out += (i ? ", " : "") + python_repr(v.as_list()[i]);
    return out + "]";
  }
  if (v.is_dict()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, item] : v.as_dict()) {
      out += (first ? "" : ", ") + repr_string(k) + ": " + python_repr(item);
      first = false;
    }
    return out + "}";
  }
  return to_display_string(v);
}

std::string to_display_string(const Value& v) {
  if (v.is_undefined()) return "";
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_int()) return std::to_string(v.as_int());
  if (v.is_float()) return float_repr(v.as_number());
  if (v.is_string()) return v.as_string();
  if (v.is_list() || v.is_dict()) return python_repr(v);
  if (v.is_namespace()) return "<Namespace>";
  return "<function " + v.as_callable().name + ">";
}

namespace {
struct JsonStyle {
  int indent;
  std::string_view item_separator, key_separator;
};
}  // namespace

// transformers' chat-template tojson: json.dumps with ensure_ascii=False. Strings take
// engine/common/json_string's escapes, which also write U+FFFD for a byte that is not UTF-8 (where
// Python would have refused the text before any template ran).
static void append_json(std::string& out, const Value& v, const JsonStyle& style, int depth) {
  int indent = style.indent;
  if (depth > 100) throw EvalError("tojson: nesting deeper than 100 levels");
  charge_work(1);
  auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  };
  std::string_view item_separator = style.item_separator;
  if (v.is_none())
    out += "null";
  else if (v.is_bool())
    out += v.as_bool() ? "true" : "false";
  else if (v.is_int())
    out += std::to_string(v.as_int());
  else if (v.is_float()) {
    double d = v.as_number();
    out += std::isnan(d)   ? "NaN"
           : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                           : float_repr(d);
  } else if (v.is_string())
    append_json_string(out, v.as_string());
  else if (v.is_list()) {
    if (v.as_list().empty()) return void(out += "[]");
    out += '[';
    for (size_t i = 0; i < v.as_list().size(); ++i) {
      if (i) out += item_separator;
      newline(depth + 1);
      append_json(out, v.as_list()[i], style, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (v.is_dict()) {
    if (v.as_dict().empty()) return void(out += "{}");
    out += '{';
    bool first = true;
    for (const auto& [k, item] : v.as_dict()) {
      if (!first) out += item_separator;
      first = false;
      newline(depth + 1);
      append_json_string(out, k);
      out += style.key_separator;
      append_json(out, item, style, depth + 1);
    }
    newline(depth);
    out += '}';
  } else {
    throw EvalError(
        fmt::format("tojson: Object of type {} is not JSON serializable", type_name(v)));
  }
}

std::string to_json(const Value& v, int indent, std::string_view item_separator,
                    std::string_view key_separator) {
  JsonStyle style{indent, item_separator, key_separator};
  if (style.item_separator.empty()) style.item_separator = indent < 0 ? ", " : ",";
  if (style.key_separator.empty()) style.key_separator = ": ";
  std::string out;
  append_json(out, v, style, 0);
  return out;
}

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
  offsets.push_back(s.size());
  return offsets;
}

}  // namespace rose::jinja
