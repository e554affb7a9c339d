#include "engine/chat/jinja_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>

namespace rose::jinja {
namespace {

[[noreturn]] void eval_fail(const std::string& message) { throw EvalError(message); }

bool is_int_like(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t int_of(const Value& v) { return v.is_bool() ? int64_t{v.as_bool()} : v.as_int(); }

void check_size(size_t size) {
  charge_work(static_cast<int64_t>(size / 256));
  if (size > kMaxValueSize)
    eval_fail(fmt::format("value larger than the {} byte limit", kMaxValueSize));
}

bool is_space_byte(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string strip_chars(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_this = [&](char c) {
    return chars.is_string() ? chars.as_string().find(c) != std::string::npos : is_space_byte(c);
  };
  size_t begin = 0, end = s.size();
  if (left)
    while (begin < end && strip_this(s[begin])) ++begin;
  if (right)
    while (end > begin && strip_this(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

Value split_string(const std::string& s, const Value& separator, const Value& max_split) {
  int64_t limit = max_split.is_int() ? max_split.as_int() : -1;
  ValueList parts;
  if (!separator.is_string()) {  // split(): runs of whitespace, no empty parts
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_space_byte(s[i])) ++i;
      if (i >= s.size()) break;
      size_t end = i;
      if (limit >= 0 && static_cast<int64_t>(parts.size()) == limit) end = s.size();
      while (end < s.size() && !is_space_byte(s[end])) ++end;
      parts.emplace_back(limit >= 0 && static_cast<int64_t>(parts.size()) == limit
                             ? strip_chars(s.substr(i), Value(), false, true)
                             : s.substr(i, end - i));
      i = end;
    }
    return parts;
  }
  const std::string& sep = separator.as_string();
  if (sep.empty()) eval_fail("split: empty separator");
  size_t start = 0;
  for (;;) {
    size_t found = s.find(sep, start);
    if (found == std::string::npos || (limit >= 0 && static_cast<int64_t>(parts.size()) >= limit))
      break;
    parts.emplace_back(s.substr(start, found - start));
    start = found + sep.size();
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` between every character (and at both ends)
    std::vector<size_t> offsets = code_point_offsets(s);
    for (size_t i = 0; i + 1 < offsets.size() && (count < 0 || done < count); ++i, ++done) {
      out += to;
      out += s.substr(offsets[i], offsets[i + 1] - offsets[i]);
      start = offsets[i + 1];
    }
    if (count < 0 || done < count) out += to;
    check_size(out.size() + s.size());
    return out + s.substr(start);
  }
  for (;;) {
    size_t found = s.find(from, start);
    if (found == std::string::npos || (count >= 0 && done >= count)) break;
    out += s.substr(start, found - start) + to;
    check_size(out.size());
    start = found + from.size();
    ++done;
  }
  return out + s.substr(start);
}

std::string change_case(std::string s, bool upper) {
  for (char& c : s)
    c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c))
                                : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// str.title(): a letter after a non-letter is upper case, every other letter lower case.
std::string python_title(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    if (is_alpha(c)) {
      c = static_cast<char>(previous_cased ? std::tolower(static_cast<unsigned char>(c))
                                           : std::toupper(static_cast<unsigned char>(c)));
      previous_cased = true;
    } else {
      previous_cased = false;
    }
  }
  return out;
}

bool affix_matches(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      eval_fail(fmt::format("{}with first arg must be str or a tuple of str",
                            prefix ? "starts" : "ends"));
    return prefix ? s.starts_with(a.as_string()) : s.ends_with(a.as_string());
  };
  if (affix.is_list()) return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
  return one(affix);
}

Value string_method(const std::string& s, const std::string& name) {
  auto method = [&](NativeFunction f) { return Value::function("str." + name, std::move(f)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return method([s, name](CallArgs& a) {
      return Value(strip_chars(s, a.get(0, "chars"), name != "rstrip", name != "lstrip"));
    });
  if (name == "split")
    return method(
        [s](CallArgs& a) { return split_string(s, a.get(0, "sep"), a.get(1, "maxsplit")); });
  if (name == "startswith" || name == "endswith")
    return method([s, name](CallArgs& a) {
      return Value(affix_matches(s, a.get(0, "prefix"), name == "startswith"));
    });
  if (name == "replace")
    return method([s](CallArgs& a) {
      Value from = a.get(0, "old"), to = a.get(1, "new"), count = a.get(2, "count");
      if (!from.is_string() || !to.is_string()) eval_fail("replace() arguments must be str");
      return Value(
          replace_all(s, from.as_string(), to.as_string(), count.is_int() ? count.as_int() : -1));
    });
  if (name == "upper" || name == "lower")
    return method([s, name](CallArgs&) { return Value(change_case(s, name == "upper")); });
  if (name == "title") return method([s](CallArgs&) { return Value(python_title(s)); });
  if (name == "capitalize")
    return method([s](CallArgs&) {
      std::string out = change_case(s, false);
      if (!out.empty())
        out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
      return Value(out);
    });
  if (name == "find" || name == "count")
    return method([s, name](CallArgs& a) {
      Value needle = a.get(0, "sub");
      if (!needle.is_string()) eval_fail(name + "() argument must be str");
      if (name == "find") {
        size_t at = s.find(needle.as_string());
        return Value(at == std::string::npos
                         ? int64_t{-1}
                         : static_cast<int64_t>(code_point_offsets(s.substr(0, at)).size() - 1));
      }
      if (needle.as_string().empty())
        return Value(static_cast<int64_t>(code_point_offsets(s).size()));
      int64_t n = 0;
      for (size_t at = s.find(needle.as_string()); at != std::string::npos;
           at = s.find(needle.as_string(), at + needle.as_string().size()))
        ++n;
      return Value(n);
    });
  if (name == "join")
    return method([s](CallArgs& a) {
      std::string out;
      ValueList items = iterate(a.get(0, "iterable"));
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) eval_fail("join: sequence item is not a str");
        out += (i ? s : "") + items[i].as_string();
        check_size(out.size());
      }
      return Value(out);
    });
  return Value::undefined(name);
}

Value dict_method(const std::shared_ptr<ValueDict>& dict, const std::string& name) {
  auto method = [&](NativeFunction f) { return Value::function("dict." + name, std::move(f)); };
  if (name == "items")
    return method([dict](CallArgs&) {
      ValueList pairs;
      for (const auto& [k, v] : *dict) pairs.emplace_back(ValueList{Value(k), v});
      return Value(std::move(pairs));
    });
  if (name == "keys")
    return method([dict](CallArgs&) {
      ValueList keys;
      for (const auto& entry : *dict) keys.emplace_back(entry.first);
      return Value(std::move(keys));
    });
  if (name == "values")
    return method([dict](CallArgs&) {
      ValueList values;
      for (const auto& entry : *dict) values.push_back(entry.second);
      return Value(std::move(values));
    });
  if (name == "get")
    return method([dict](CallArgs& a) {
      Value key = a.get(0, "key");
      const Value* found = key.is_string() ? dict_find(*dict, key.as_string()) : nullptr;
      if (found) return *found;
      Value fallback = a.get(1, "default");
      return fallback.is_undefined() ? Value(None{}) : fallback;
    });
  return Value::undefined(name);
}

bool is_dict_method(const std::string& name) {
  return name == "items" || name == "keys" || name == "values" || name == "get";
}

int64_t normalize_index(int64_t index, size_t size) {
  return index < 0 ? index + static_cast<int64_t>(size) : index;
}

}  // namespace

void require_defined(const Value& v) {
  if (v.is_undefined()) {
    const std::string& name = std::get<Undefined>(v.data).name;
    eval_fail(name.empty() ? "undefined value used" : fmt::format("'{}' is undefined", name));
  }
}

Value get_attribute(const Value& object, const std::string& name) {
  require_defined(object);
  if (object.is_dict()) {
    if (is_dict_method(name))
      return dict_method(std::get<std::shared_ptr<ValueDict>>(object.data), name);
    const Value* found = dict_find(object.as_dict(), name);
    return found ? *found : Value::undefined(name);
  }
  if (object.is_namespace()) {
    const Value* found = dict_find(object.as_namespace().attributes, name);
    return found ? *found : Value::undefined(name);
  }
  if (object.is_string()) return string_method(object.as_string(), name);
  return Value::undefined(name);
}

Value get_item(const Value& object, const Value& key) {
  require_defined(object);
  if (object.is_dict()) {
    if (!key.is_string()) return Value::undefined(to_display_string(key));
    const Value* found = dict_find(object.as_dict(), key.as_string());
    if (found) return *found;
    return get_attribute(object, key.as_string());
  }
  if (object.is_list() && is_int_like(key)) {
    int64_t i = normalize_index(int_of(key), object.as_list().size());
    if (i < 0 || i >= static_cast<int64_t>(object.as_list().size()))
      return Value::undefined(to_display_string(key));
    return object.as_list()[static_cast<size_t>(i)];
  }
  if (object.is_string() && is_int_like(key)) {
    std::vector<size_t> offsets = code_point_offsets(object.as_string());
    int64_t i = normalize_index(int_of(key), offsets.size() - 1);
    if (i < 0 || i >= static_cast<int64_t>(offsets.size()) - 1)
      return Value::undefined(to_display_string(key));
    size_t at = offsets[static_cast<size_t>(i)];
    return object.as_string().substr(at, offsets[static_cast<size_t>(i) + 1] - at);
  }
  if (key.is_string()) return get_attribute(object, key.as_string());
  return Value::undefined(to_display_string(key));
}

Value slice_value(const Value& object, const Value& start_value, const Value& stop_value,
                  const Value& step_value) {
  require_defined(object);
  auto bound = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!is_int_like(v)) eval_fail(fmt::format("slice {} must be an integer or none", what));
    return int_of(v);
  };
  int64_t step = bound(step_value, "step").value_or(1);
  if (step == 0) eval_fail("slice step cannot be zero");
  bool is_string = object.is_string();
  if (!is_string && !object.is_list())
    eval_fail(fmt::format("'{}' object is not subscriptable", type_name(object)));
  std::vector<size_t> offsets =
      is_string ? code_point_offsets(object.as_string()) : std::vector<size_t>{};
  int64_t size = static_cast<int64_t>(is_string ? offsets.size() - 1 : object.as_list().size());
  auto clamp = [&](std::optional<int64_t> v, int64_t fallback) {  // Python's PySlice_AdjustIndices
    if (!v) return fallback;
    int64_t i = *v < 0 ? *v + size : *v;
    if (step > 0) return std::clamp<int64_t>(i, 0, size);
    return std::clamp<int64_t>(i, -1, size - 1);
  };
  int64_t start = clamp(bound(start_value, "start"), step > 0 ? 0 : size - 1);
  int64_t stop = clamp(bound(stop_value, "stop"), step > 0 ? size : -1);
  std::string text;
  ValueList items;
  charge_work(size);
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (is_string)
      text += object.as_string().substr(
          offsets[static_cast<size_t>(i)],
          offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]);
    else
      items.push_back(object.as_list()[static_cast<size_t>(i)]);
  }
  return is_string ? Value(std::move(text)) : Value(std::move(items));
}

ValueList iterate(const Value& v) {
  if (v.is_undefined()) return {};
  charge_work(static_cast<int64_t>(v.is_list()     ? v.as_list().size()
                                   : v.is_dict()   ? v.as_dict().size()
                                   : v.is_string() ? v.as_string().size()
                                                   : 0));
  if (v.is_list()) return v.as_list();
  if (v.is_dict()) {
    ValueList keys;
    for (const auto& entry : v.as_dict()) keys.emplace_back(entry.first);
    return keys;
  }
  if (v.is_string()) {
    std::vector<size_t> offsets = code_point_offsets(v.as_string());
    ValueList chars;
    for (size_t i = 0; i + 1 < offsets.size(); ++i)
      chars.emplace_back(v.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
    return chars;
  }
  eval_fail(fmt::format("'{}' object is not iterable", type_name(v)));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      eval_fail(
          fmt::format("'in <string>' requires string as left operand, not {}", type_name(item)));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict())
    return item.is_string() && dict_find(container.as_dict(), item.as_string()) != nullptr;
  for (const Value& v : iterate(container))
    if (values_equal(v, item)) return true;
  return false;
}

// Python's ordering for <, >, <=, >=: numbers with numbers, strings with strings, lists item-wise.
int compare_values(const Value& a, const Value& b) {
  bool a_numeric = a.is_number() || a.is_bool(), b_numeric = b.is_number() || b.is_bool();
  if (a_numeric && b_numeric) {
    if (is_int_like(a) && is_int_like(b)) return int_of(a) < int_of(b) ? -1 : int_of(a) > int_of(b);
    return a.as_number() < b.as_number() ? -1 : a.as_number() > b.as_number();
  }
  if (a.is_string() && b.is_string())
    return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() > b.as_string();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list(), &y = b.as_list();
    charge_work(static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!values_equal(x[i], y[i])) return compare_values(x[i], y[i]);
    return x.size() < y.size() ? -1 : x.size() > y.size();
  }
  require_defined(a);
  require_defined(b);
  eval_fail(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a),
                        type_name(b)));
}

namespace {

Value repeat(const Value& sequence, int64_t times) {
  if (times <= 0) return sequence.is_string() ? Value("") : Value(ValueList{});
  size_t unit = sequence.is_string() ? sequence.as_string().size() : sequence.as_list().size();
  if (unit != 0 && static_cast<uint64_t>(times) > kMaxValueSize / unit)
    check_size(kMaxValueSize + 1);
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return out;
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return out;
}

Value integer_arithmetic(const std::string& op, int64_t a, int64_t b) {
  int64_t result = 0;
  bool overflow = false;
  if (op == "+")
    overflow = __builtin_add_overflow(a, b, &result);
  else if (op == "-")
    overflow = __builtin_sub_overflow(a, b, &result);
  else if (op == "*")
    overflow = __builtin_mul_overflow(a, b, &result);
  else if (op == "//" || op == "%") {
    if (b == 0) eval_fail("integer division or modulo by zero");
    if (a == INT64_MIN && b == -1) eval_fail("integer overflow");
    int64_t q = a / b, r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) {  // Python floors
      --q;
      r += b;
    }
    return op == "//" ? q : r;
  } else if (op == "**") {
    if (b < 0) return std::pow(static_cast<double>(a), static_cast<double>(b));
    result = 1;
    for (int64_t i = 0; i < b && !overflow; ++i) {
      overflow = __builtin_mul_overflow(result, a, &result);
      if (result == 0 || result == 1) break;
    }
  }
  if (overflow) eval_fail("integer overflow (beyond 64 bits) is not supported");
  return result;
}

Value float_arithmetic(const std::string& op, double a, double b) {
  if (op == "+") return a + b;
  if (op == "-") return a - b;
  if (op == "*") return a * b;
  if (op == "**") return std::pow(a, b);
  if (b == 0) eval_fail("float division by zero");
  if (op == "/") return a / b;
  double floor_quotient = std::floor(a / b);
  if (op == "//") return floor_quotient;
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

}  // namespace

Value binary_operation(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return values_equal(left, right);
  if (op == "!=") return !values_equal(left, right);
  if (op == "in") return contains(right, left);
  if (op == "notin") return !contains(right, left);
  if (op == "~") {
    std::string out = to_display_string(left) + to_display_string(right);
    check_size(out.size());
    return out;
  }
  if (op == "<") return compare_values(left, right) < 0;
  if (op == ">") return compare_values(left, right) > 0;
  if (op == "<=") return compare_values(left, right) <= 0;
  if (op == ">=") return compare_values(left, right) >= 0;
  require_defined(left);
  require_defined(right);
  bool numeric = (left.is_number() || left.is_bool()) && (right.is_number() || right.is_bool());
  if (numeric) {
    if (op == "/") {
      if (right.as_number() == 0) eval_fail("division by zero");
      return left.as_number() / right.as_number();
    }
    if (is_int_like(left) && is_int_like(right))
      return integer_arithmetic(op, int_of(left), int_of(right));
    return float_arithmetic(op, left.as_number(), right.as_number());
  }
  if (op == "+" && left.is_string() && right.is_string()) {
    check_size(left.as_string().size() + right.as_string().size());
    return left.as_string() + right.as_string();
  }
  if (op == "+" && left.is_list() && right.is_list()) {
    ValueList out = left.as_list();
    out.insert(out.end(), right.as_list().begin(), right.as_list().end());
    check_size(out.size());
    return out;
  }
  if (op == "*" && (left.is_string() || left.is_list()) && is_int_like(right))
    return repeat(left, int_of(right));
  if (op == "*" && (right.is_string() || right.is_list()) && is_int_like(left))
    return repeat(right, int_of(left));
  if (op == "%" && left.is_string())
    eval_fail("unsupported construct: printf-style '%' string formatting");
  eval_fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(left),
                        type_name(right)));
}

}  // namespace rose::jinja
