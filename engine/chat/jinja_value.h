#pragma once
// Jinja values: the dynamic type the chat-template interpreter computes with, following jinja2's
// (that is, Python's) truthiness, equality, string conversion and JSON rules.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rose::jinja {

// An error while evaluating, without its location: the evaluator adds template name and line.
class EvalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// raise_exception(message) in a template: the message is the template's own.
class TemplateRaised : public EvalError {
 public:
  using EvalError::EvalError;
};

// The active render's work counter: the evaluator counts a step per expression and statement, and
// built-ins that walk big values (iteration, `in`, sort, copies of long strings) charge their size,
// so that no template runs unbounded. Throws EvalError past the limit.
void charge_work(int64_t units);
class WorkMeter {
 public:
  explicit WorkMeter(int64_t limit);
  ~WorkMeter();
  WorkMeter(const WorkMeter&) = delete;
  WorkMeter& operator=(const WorkMeter&) = delete;
  int64_t used = 0;
  int64_t limit;

 private:
  WorkMeter* previous_;
};

struct Value;
using ValueList = std::vector<Value>;
// Dicts keep insertion order (as Python's do) and string keys (all that templates build).
using ValueDict = std::vector<std::pair<std::string, Value>>;

struct CallArgs;
using NativeFunction = std::function<Value(CallArgs&)>;
struct Callable {
  std::string name;
  NativeFunction call;
};
// namespace(): the one mutable object jinja2 gives templates (set ns.x = ... escapes loop scopes).
struct Namespace {
  ValueDict attributes;
};

struct Undefined {
  std::string name;  // what was looked up, for "'x' is undefined"
};
struct None {};

struct Value {
  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<ValueList>,
               std::shared_ptr<ValueDict>, std::shared_ptr<Callable>, std::shared_ptr<Namespace>>
      data;

  Value() : data(Undefined{}) {}
  Value(None) : data(None{}) {}
  Value(bool b) : data(b) {}
  Value(int64_t i) : data(i) {}
  Value(int i) : data(int64_t{i}) {}
  Value(double d) : data(d) {}
  Value(std::string s) : data(std::move(s)) {}
  Value(const char* s) : data(std::string(s)) {}
  Value(ValueList list) : data(std::make_shared<ValueList>(std::move(list))) {}
  Value(ValueDict dict) : data(std::make_shared<ValueDict>(std::move(dict))) {}
  static Value undefined(std::string name) {
    Value v;
    v.data = Undefined{std::move(name)};
    return v;
  }
  static Value function(std::string name, NativeFunction call) {
    Value v;
    v.data = std::make_shared<Callable>(Callable{std::move(name), std::move(call)});
    return v;
  }

  bool is_undefined() const { return std::holds_alternative<Undefined>(data); }
  bool is_none() const { return std::holds_alternative<None>(data); }
  bool is_bool() const { return std::holds_alternative<bool>(data); }
  bool is_int() const { return std::holds_alternative<int64_t>(data); }
  bool is_float() const { return std::holds_alternative<double>(data); }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return std::holds_alternative<std::string>(data); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<ValueList>>(data); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<ValueDict>>(data); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<Callable>>(data); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(data); }

  bool as_bool() const { return std::get<bool>(data); }
  int64_t as_int() const { return std::get<int64_t>(data); }
  double as_number() const;  // int, float or bool as a double
  const std::string& as_string() const { return std::get<std::string>(data); }
  const ValueList& as_list() const { return *std::get<std::shared_ptr<ValueList>>(data); }
  const ValueDict& as_dict() const { return *std::get<std::shared_ptr<ValueDict>>(data); }
  Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(data); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(data); }
};

struct CallArgs {
  ValueList positional;
  ValueDict keyword;
  // The i-th argument, by position or by keyword `name`; undefined when absent.
  Value get(size_t index, std::string_view name) const;
};

const char* type_name(const Value& v);  // Python's type name: "str", "dict", ...
bool truthy(const Value& v);
bool values_equal(const Value& a, const Value& b);
std::string to_display_string(const Value& v);  // str(v): what {{ v }} prints
std::string python_repr(const Value& v);        // repr(v): how str() shows items of lists and dicts
std::string float_repr(double d);
// json.dumps(v, ensure_ascii=False, indent=indent, separators=None): the transformers tojson.
// indent < 0 means None; empty separators mean json's defaults (", " or "," with an indent, ": ").
std::string to_json(const Value& v, int indent, std::string_view item_separator = {},
                    std::string_view key_separator = {});
const Value* dict_find(const ValueDict& dict, std::string_view key);

// Python's str indexes code points: the string's code points as byte offsets (plus the end).
std::vector<size_t> code_point_offsets(std::string_view s);

}  // namespace rose::jinja
