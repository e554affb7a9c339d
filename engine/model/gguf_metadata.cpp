// GgufFile's typed metadata reads: one place that turns a stored type into what the caller asked
// for, with errors that name the file, the key and both types.
#include <cstring>
#include <limits>

#include "engine/common/error.h"
#include "engine/model/gguf.h"

namespace rose {

namespace {

bool is_integer(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void wrong_type(const std::string& source, std::string_view key, const char* wanted,
                             const GgufValue& value) {
  fail("{}: metadata '{}' must be {}, got {}{}", source, key, wanted,
       value.type == GgufType::kArray ? "array of " : "",
       gguf_type_name(value.type == GgufType::kArray ? value.element_type : value.type));
}

const GgufValue& required(const GgufFile& file, std::string_view key) {
  const GgufValue* value = file.find(key);
  if (!value) fail("{}: missing metadata '{}'", file.source(), key);
  return *value;
}

const GgufValue& array_of(const GgufFile& file, std::string_view key, GgufType element,
                          const char* wanted) {
  const GgufValue& value = required(file, key);
  if (value.type != GgufType::kArray || value.element_type != element) {
    wrong_type(file.source(), key, wanted, value);
  }
  return value;
}

}  // namespace

std::optional<uint64_t> GgufFile::find_uint(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (!is_integer(value->type)) wrong_type(source_, key, "an integer", *value);
  if (const int64_t* signed_value = std::get_if<int64_t>(&value->scalar)) {
    if (*signed_value < 0) fail("{}: metadata '{}' = {} is negative", source_, key, *signed_value);
    return uint64_t(*signed_value);
  }
  return std::get<uint64_t>(value->scalar);
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (value->type != GgufType::kF32 && value->type != GgufType::kF64) {
    wrong_type(source_, key, "a float", *value);
  }
  return std::get<double>(value->scalar);
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (value->type != GgufType::kBool) wrong_type(source_, key, "a bool", *value);
  return std::get<bool>(value->scalar);
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (value->type != GgufType::kString) wrong_type(source_, key, "a string", *value);
  return std::string(std::get<std::string_view>(value->scalar));
}

uint64_t GgufFile::get_uint(std::string_view key) const {
  required(*this, key);
  return *find_uint(key);
}

double GgufFile::get_float(std::string_view key) const {
  required(*this, key);
  return *find_float(key);
}

std::string GgufFile::get_string(std::string_view key) const {
  required(*this, key);
  return *find_string(key);
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& value = array_of(*this, key, GgufType::kString, "an array of strings");
  return {value.strings.begin(), value.strings.end()};
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue& value = array_of(*this, key, GgufType::kF32, "an array of f32");
  std::vector<float> out(size_t(value.count));
  if (!out.empty()) std::memcpy(out.data(), value.raw.data(), value.raw.size());
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const GgufValue& value = array_of(*this, key, GgufType::kI32, "an array of i32");
  std::vector<int32_t> out(size_t(value.count));
  if (!out.empty()) std::memcpy(out.data(), value.raw.data(), value.raw.size());
  return out;
}

}  // namespace rose
