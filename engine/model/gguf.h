#pragma once
// A GGUF (v2/v3) file, memory-mapped and fully validated when opened: header, metadata, tensor
// infos, alignment and every tensor's byte range are checked before any tensor data is read.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/model/quant.h"

namespace rose {

class MappedFile;

// Metadata value types as stored (ggml docs/gguf.md).
enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

const char* gguf_type_name(GgufType type);

struct GgufValue {
  GgufType type = GgufType::kU8;
  // Scalars: unsigned ints as uint64_t, signed as int64_t, floats as double, strings as views
  // into the mapping.
  std::variant<uint64_t, int64_t, double, bool, std::string_view> scalar;
  // Arrays (type == kArray): the element type, count, and the elements' bytes in the file;
  // string arrays also get their views here.
  GgufType element_type = GgufType::kU8;
  uint64_t count = 0;
  std::span<const uint8_t> raw;
  std::vector<std::string_view> strings;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t>
      dims;  // ne0 first (innermost): a PyTorch (rows, cols) matrix is [cols, rows]
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t numel() const;
  int64_t rows() const { return dims.empty() ? 0 : numel() / dims[0]; }
};

class GgufFile {
 public:
  static GgufFile open(const std::filesystem::path& path);
  // Parses bytes that must outlive the result (used by open() and the fuzzer).
  static GgufFile parse(std::span<const uint8_t> bytes, std::string source);

  const std::string& source() const { return source_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  const GgufTensor* find_tensor(std::string_view name) const;
  const GgufTensor& tensor(std::string_view name) const;  // throws naming the file

  // Typed metadata reads. get_* throw when the key is missing or has another type; find_* return
  // nullopt when missing and throw on a wrong type. Integers accept any integer type whose value
  // fits; floats accept f32 and f64.
  std::optional<uint64_t> find_uint(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  double get_float(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;

  // Dequantizes a tensor to fp32 (dst.size() == tensor.numel()).
  void read_f32(const GgufTensor& tensor, std::span<float> dst) const;

 private:
  std::string source_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
  std::shared_ptr<MappedFile> mapping_;  // null for parse()
};

}  // namespace rose
