#pragma once
// Jinja built-ins: operators, attribute and item access (with Python's str/dict/list methods),
// slicing, filters and tests, with jinja2's semantics for the values templates meet.
#include <string>

#include "engine/chat/jinja_value.h"

namespace rose::jinja {

// Larger strings or lists than this are refused, so that 'x' * 10**9 ends with an error.
constexpr size_t kMaxValueSize = size_t{64} << 20;

Value get_attribute(const Value& object, const std::string& name);  // object.name
Value get_item(const Value& object, const Value& key);              // object[key]
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);
Value binary_operation(const std::string& op, const Value& left, const Value& right);
int compare_values(const Value& a, const Value& b);        // Python's <: -1, 0, 1
bool contains(const Value& container, const Value& item);  // item in container
ValueList iterate(const Value& v);                         // what a for loop walks
Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
bool apply_test(const std::string& name, const Value& input, CallArgs& args);
bool has_filter(const std::string& name);
bool has_test(const std::string& name);
// Raises "'name' is undefined" when v is undefined: what jinja2 does on using one.
void require_defined(const Value& v);

}  // namespace rose::jinja
