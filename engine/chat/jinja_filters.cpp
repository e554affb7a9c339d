// jinja2's filters and tests, as far as chat templates use them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/chat/jinja_builtins.h"

namespace rose::jinja {
namespace {

[[noreturn]] void eval_fail(const std::string& message) { throw EvalError(message); }

const std::string& require_string(const Value& v, const char* filter) {
  if (!v.is_string())
    eval_fail(fmt::format("filter '{}' expects a string, got {}", filter, type_name(v)));
  return v.as_string();
}

std::string str_of(const Value& v) { return to_display_string(v); }

Value call_method(const Value& object, const std::string& name, ValueList args) {
  Value method = get_attribute(object, name);
  CallArgs call{std::move(args), {}};
  return method.as_callable().call(call);
}

// An attribute path of selectattr/map/join/sort ("a.b" walks into nested dicts; "0" indexes).
Value lookup_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = v.is_undefined()
            ? v
            : get_item(v, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// select/reject/selectattr/rejectattr: test name and its arguments after `skip` leading arguments.
Value filter_by_test(const Value& input, CallArgs& args, bool by_attribute, bool keep) {
  size_t first = by_attribute ? 1 : 0;
  std::string attribute =
      by_attribute ? require_string(args.get(0, "attribute"), "selectattr") : "";
  Value test_name = first < args.positional.size() ? args.positional[first] : Value();
  CallArgs test_args;
  for (size_t i = first + 1; i < args.positional.size(); ++i)
    test_args.positional.push_back(args.positional[i]);
  ValueList out;
  for (const Value& item : iterate(input)) {
    Value subject = by_attribute ? lookup_path(item, attribute) : item;
    bool passed = test_name.is_undefined()
                      ? truthy(subject)
                      : apply_test(require_string(test_name, "select"), subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return out;
}

Value map_filter(const Value& input, CallArgs& args) {
  ValueList out;
  Value attribute = args.get(99, "attribute");
  if (attribute.is_string()) {
    Value fallback = args.get(99, "default");
    for (const Value& item : iterate(input)) {
      Value v = lookup_path(item, attribute.as_string());
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return out;
  }
  const std::string& filter = require_string(args.get(0, "filter"), "map");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : iterate(input)) out.push_back(apply_filter(filter, item, rest));
  return out;
}

std::string indent_filter(const std::string& s, CallArgs& args) {
  Value width = args.get(0, "width"), first = args.get(1, "first"), blank = args.get(2, "blank");
  std::string indention =
      width.is_string()
          ? width.as_string()
          : std::string(width.is_int()
                            ? static_cast<size_t>(std::clamp<int64_t>(width.as_int(), 0, 256))
                            : 4,
                        ' ');
  std::vector<std::string> lines;  // (s + "\n").splitlines()
  std::string text = s + "\n";
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || text[i] == '\r') {
      lines.push_back(text.substr(start, i - start));
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    bool indent_line = i > 0 && (truthy(blank) || !lines[i].empty());
    out += (indent_line ? indention : "") + lines[i];
  }
  return truthy(first) ? indention + out : out;
}

Value tojson_filter(const Value& input, CallArgs& args) {
  Value indent = args.get(0, "indent"), separators = args.get(2, "separators"),
        sort_keys = args.get(3, "sort_keys");
  if (truthy(sort_keys)) eval_fail("unsupported construct: tojson(sort_keys=true)");
  int width = -1;
  if (indent.is_int())
    width = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  else if (!indent.is_undefined() && !indent.is_none())
    eval_fail("tojson: indent must be an integer");
  std::string item_separator, key_separator;
  if (separators.is_list() && separators.as_list().size() == 2) {
    item_separator = str_of(separators.as_list()[0]);
    key_separator = str_of(separators.as_list()[1]);
  }
  return to_json(input, width, item_separator, key_separator);
}

Value sort_filter(const Value& input, CallArgs& args) {
  ValueList items = iterate(input);
  charge_work(static_cast<int64_t>(items.size()) * 20);  // n log n comparisons
  Value attribute = args.get(2, "attribute");
  auto key = [&](const Value& v) {
    return attribute.is_string() ? lookup_path(v, attribute.as_string()) : v;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return compare_values(key(a), key(b)) < 0;
  });
  if (truthy(args.get(0, "reverse"))) std::reverse(items.begin(), items.end());
  return items;
}

Value first_or_last(const Value& input, bool first) {
  ValueList items = iterate(input);
  if (items.empty()) return Value::undefined("first");
  return first ? items.front() : items.back();
}

Value int_filter(const Value& input, CallArgs& args) {
  Value fallback = args.get(0, "default");
  if (input.is_int() || input.is_bool())
    return input.is_bool() ? Value(int64_t{input.as_bool()}) : input;
  if (input.is_float()) return static_cast<int64_t>(input.as_number());
  if (input.is_string()) {
    try {
      size_t used = 0;
      int64_t v = std::stoll(input.as_string(), &used);
      if (used == input.as_string().size()) return v;
    } catch (const std::exception&) {
    }
  }
  return fallback.is_undefined() ? Value(int64_t{0}) : fallback;
}

Value trim_filter(const Value& v, CallArgs& a) {
  return call_method(Value(str_of(v)), "strip", {a.get(0, "chars")});
}

Value title_filter(const Value& v, CallArgs&) {
  std::string s = str_of(v), out = s;
  bool word_start = true;  // jinja2: words begin after whitespace, '-' or an opening bracket
  for (char& c : out) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' ||
        c == '[' || c == '<') {
      word_start = true;
      continue;
    }
    c = static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c))
                                     : std::tolower(static_cast<unsigned char>(c)));
    word_start = false;
  }
  return Value(out);
}

Value length_filter(const Value& v, CallArgs&) {
  if (v.is_string())
    return Value(static_cast<int64_t>(code_point_offsets(v.as_string()).size() - 1));
  if (v.is_undefined()) return Value(int64_t{0});
  if (!v.is_list() && !v.is_dict())
    eval_fail(fmt::format("object of type '{}' has no len()", type_name(v)));
  return Value(static_cast<int64_t>(v.is_list() ? v.as_list().size() : v.as_dict().size()));
}

Value join_filter(const Value& v, CallArgs& a) {
  Value separator = a.get(0, "d"), attribute = a.get(1, "attribute");
  std::string sep = separator.is_undefined() ? "" : str_of(separator), out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    out += (first ? "" : sep) +
           str_of(attribute.is_string() ? lookup_path(item, attribute.as_string()) : item);
    first = false;
    if (out.size() > kMaxValueSize) eval_fail("join: result too large");
  }
  return Value(out);
}

Value replace_filter(const Value& v, CallArgs& a) {
  return call_method(
      Value(str_of(v)), "replace",
      {Value(str_of(a.get(0, "old"))), Value(str_of(a.get(1, "new"))), a.get(2, "count")});
}

Value default_filter(const Value& v, CallArgs& a) {
  Value fallback = a.get(0, "default_value");
  bool use_fallback = truthy(a.get(1, "boolean")) ? !truthy(v) : v.is_undefined();
  return use_fallback ? (fallback.is_undefined() ? Value("") : fallback) : v;
}

Value float_filter(const Value& v, CallArgs&) {
  if (v.is_number() || v.is_bool()) return Value(v.as_number());
  try {
    return Value(v.is_string() ? std::stod(v.as_string()) : 0.0);
  } catch (const std::exception&) {
    return Value(0.0);
  }
}

Value items_filter(const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value(ValueList{});
  if (!v.is_dict()) eval_fail("filter 'items' expects a mapping");
  return call_method(v, "items", {});
}

Value reverse_filter(const Value& v, CallArgs&) {
  if (v.is_string()) return slice_value(v, Value(), Value(), Value(int64_t{-1}));
  ValueList items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value unique_filter(const Value& v, CallArgs&) {
  ValueList out;
  for (const Value& item : iterate(v)) {
    charge_work(static_cast<int64_t>(out.size()));
    if (std::none_of(out.begin(), out.end(),
                     [&](const Value& seen) { return values_equal(seen, item); }))
      out.push_back(item);
  }
  return Value(std::move(out));
}

Value wordcount_filter(const Value& v, CallArgs&) {
  return Value(static_cast<int64_t>(call_method(Value(str_of(v)), "split", {}).as_list().size()));
}

using Filter = Value (*)(const Value&, CallArgs&);
const std::map<std::string, Filter, std::less<>>& filters() {
  static const std::map<std::string, Filter, std::less<>> table = {
      {"trim", trim_filter},
      {"upper",
       [](const Value& v, CallArgs&) { return call_method(Value(str_of(v)), "upper", {}); }},
      {"lower",
       [](const Value& v, CallArgs&) { return call_method(Value(str_of(v)), "lower", {}); }},
      {"capitalize",
       [](const Value& v, CallArgs&) { return call_method(Value(str_of(v)), "capitalize", {}); }},
      {"title", title_filter},
      {"length", length_filter},
      {"join", join_filter},
      {"tojson", tojson_filter},
      {"replace", replace_filter},
      {"first", [](const Value& v, CallArgs&) { return first_or_last(v, true); }},
      {"last", [](const Value& v, CallArgs&) { return first_or_last(v, false); }},
      {"default", default_filter},
      {"string", [](const Value& v, CallArgs&) { return Value(str_of(v)); }},
      {"safe", [](const Value& v, CallArgs&) { return v; }},
      {"int", int_filter},
      {"float", float_filter},
      {"abs",
       [](const Value& v, CallArgs&) {
         return v.is_int() ? Value(v.as_int() < 0 ? -v.as_int() : v.as_int())
                           : Value(std::fabs(v.as_number()));
       }},
      {"list", [](const Value& v, CallArgs&) { return Value(iterate(v)); }},
      {"items", items_filter},
      {"indent", [](const Value& v, CallArgs& a) { return Value(indent_filter(str_of(v), a)); }},
      {"selectattr", [](const Value& v, CallArgs& a) { return filter_by_test(v, a, true, true); }},
      {"rejectattr", [](const Value& v, CallArgs& a) { return filter_by_test(v, a, true, false); }},
      {"select", [](const Value& v, CallArgs& a) { return filter_by_test(v, a, false, true); }},
      {"reject", [](const Value& v, CallArgs& a) { return filter_by_test(v, a, false, false); }},
      {"map", map_filter},
      {"sort", sort_filter},
      {"reverse", reverse_filter},
      {"unique", unique_filter},
      {"wordcount", wordcount_filter},
  };
  return table;
}

using Test = bool (*)(const Value&, CallArgs&);
const std::map<std::string, Test, std::less<>>& tests() {
  static const std::map<std::string, Test, std::less<>> table = {
      {"defined", [](const Value& v, CallArgs&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, CallArgs&) { return v.is_undefined(); }},
      {"none", [](const Value& v, CallArgs&) { return v.is_none(); }},
      {"string", [](const Value& v, CallArgs&) { return v.is_string(); }},
      {"mapping", [](const Value& v, CallArgs&) { return v.is_dict(); }},
      {"iterable",
       [](const Value& v, CallArgs&) {
         return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
       }},
      {"sequence",
       [](const Value& v, CallArgs&) {
         return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
       }},
      {"number", [](const Value& v, CallArgs&) { return v.is_number() || v.is_bool(); }},
      {"integer", [](const Value& v, CallArgs&) { return v.is_int(); }},
      {"float", [](const Value& v, CallArgs&) { return v.is_float(); }},
      {"boolean", [](const Value& v, CallArgs&) { return v.is_bool(); }},
      {"true", [](const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
      {"false", [](const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
      {"callable", [](const Value& v, CallArgs&) { return v.is_callable(); }},
      {"odd", [](const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 != 0; }},
      {"even", [](const Value& v, CallArgs&) { return v.is_int() && v.as_int() % 2 == 0; }},
      {"divisibleby",
       [](const Value& v, CallArgs& a) {
         Value d = a.get(0, "num");
         if (!v.is_int() || !d.is_int() || d.as_int() == 0)
           eval_fail("divisibleby needs nonzero integers");
         return v.as_int() % d.as_int() == 0;
       }},
      {"eq", [](const Value& v, CallArgs& a) { return values_equal(v, a.get(0, "other")); }},
      {"ne", [](const Value& v, CallArgs& a) { return !values_equal(v, a.get(0, "other")); }},
      {"lt", [](const Value& v, CallArgs& a) { return compare_values(v, a.get(0, "other")) < 0; }},
      {"le", [](const Value& v, CallArgs& a) { return compare_values(v, a.get(0, "other")) <= 0; }},
      {"gt", [](const Value& v, CallArgs& a) { return compare_values(v, a.get(0, "other")) > 0; }},
      {"ge", [](const Value& v, CallArgs& a) { return compare_values(v, a.get(0, "other")) >= 0; }},
      {"in", [](const Value& v, CallArgs& a) { return contains(a.get(0, "seq"), v); }},
      {"sameas",
       [](const Value& v, CallArgs& a) {
         Value other = a.get(0, "other");
         return v.data.index() == other.data.index() && values_equal(v, other);
       }},
      {"lower",
       [](const Value& v, CallArgs&) {
         return v.is_string() && call_method(v, "lower", {}).as_string() == v.as_string();
       }},
      {"upper",
       [](const Value& v, CallArgs&) {
         return v.is_string() && call_method(v, "upper", {}).as_string() == v.as_string();
       }},
  };
  return table;
}

std::string canonical_filter(const std::string& name) {
  if (name == "d") return "default";
  if (name == "count") return "length";
  if (name == "e" || name == "escape") return "safe_escape_unsupported";
  return name;
}

std::string canonical_test(const std::string& name) {
  if (name == "equalto" || name == "==") return "eq";
  if (name == "!=") return "ne";
  if (name == "lessthan" || name == "<") return "lt";
  if (name == "greaterthan" || name == ">") return "gt";
  if (name == "<=") return "le";
  if (name == ">=") return "ge";
  return name;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().contains(canonical_filter(name)); }
bool has_test(const std::string& name) { return tests().contains(canonical_test(name)); }

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(canonical_filter(name));
  if (it == filters().end()) eval_fail(fmt::format("unsupported construct: filter '{}'", name));
  bool tolerates_undefined = it->first == "default" || it->first == "length" ||
                             it->first == "string" || it->first == "list" || it->first == "items" ||
                             it->first == "join" || it->first == "first" || it->first == "last";
  if (!tolerates_undefined) require_defined(input);
  return it->second(input, args);
}

bool apply_test(const std::string& name, const Value& input, CallArgs& args) {
  auto it = tests().find(canonical_test(name));
  if (it == tests().end()) eval_fail(fmt::format("unsupported construct: test '{}'", name));
  return it->second(input, args);
}

}  // namespace rose::jinja
