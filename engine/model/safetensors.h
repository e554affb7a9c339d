#pragma once
// safetensors reading and writing (reference/formats.md). A file is validated completely when it is
// opened (header length, JSON, dtypes, shapes, offsets, overlaps), so later reads of a tensor's
// bytes can never leave the mapping. Every error is a rose::Error naming the file and the tensor.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace rose {

enum class Dtype {
  kBool,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// Bytes per element.
size_t dtype_size(Dtype dtype);
// The safetensors spelling: "F32", "BF16", ...
const char* dtype_name(Dtype dtype);
// False for a name safetensors does not define.
bool parse_dtype(std::string_view name, Dtype* dtype);

// Converts `dst.size()` elements stored as `dtype` (little endian, any alignment) to fp32.
// `src` holds dst.size() * dtype_size(dtype) bytes.
void convert_to_f32(Dtype dtype, const uint8_t* src, std::span<float> dst);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // relative to the start of the data buffer
  uint64_t data_end = 0;    // exclusive
  int64_t numel() const;
  uint64_t nbytes() const { return data_end - data_begin; }
};

// "[2, 3]"
std::string shape_string(std::span<const int64_t> shape);

// A read-only memory mapping of a whole file.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// One validated safetensors file: either a mapping it owns (open) or caller-owned bytes (parse).
class SafetensorsFile {
 public:
  // Maps and validates the file.
  static SafetensorsFile open(const std::filesystem::path& path);
  // Validates `bytes` (a whole file's contents, which must outlive the result); `source` names it
  // in errors.
  static SafetensorsFile parse(std::span<const uint8_t> bytes, std::string source);

  const std::string& source() const { return source_; }
  // In the header's order.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorInfo* find(std::string_view name) const;
  // Throws rose::Error naming the file and tensor when absent.
  const TensorInfo& get(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor's bytes, inside the data buffer (checked when the file was opened).
  std::span<const uint8_t> data(const TensorInfo& tensor) const;
  // Converts the whole tensor to fp32; dst.size() must equal the tensor's numel.
  void read_f32(const TensorInfo& tensor, std::span<float> dst) const;

 private:
  std::string source_;
  std::shared_ptr<MappedFile> mapping_;  // null for parse()
  std::span<const uint8_t> data_buffer_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// The tensors of a checkpoint folder: model.safetensors, or the shards that
// model.safetensors.index.json lists (every shard opened and validated).
class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file, a .safetensors.index.json file, or a folder holding one of
  // model.safetensors.index.json / model.safetensors.
  static SafetensorsCheckpoint open(const std::filesystem::path& path);

  struct Entry {
    const SafetensorsFile* file;
    const TensorInfo* tensor;
  };
  // Found: file and tensor; absent: both null.
  Entry find(std::string_view name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, Entry> entries_;
};

// Builds a safetensors file in memory: used by tests, and to make malformed variants.
class SafetensorsWriter {
 public:
  // `bytes` is the raw little-endian data, product(shape) * dtype_size(dtype) long (checked).
  void add(std::string name, Dtype dtype, std::vector<int64_t> shape,
           std::span<const uint8_t> bytes);
  void add_f32(std::string name, std::vector<int64_t> shape, std::span<const float> values);
  void add_metadata(std::string key, std::string value);
  // The whole file: length, header JSON (padded with spaces to 8 bytes), data.
  std::string serialize() const;
  void write(const std::filesystem::path& path) const;

  // A file from any header text and data buffer, valid or not.
  static std::string raw(std::string_view header_json, std::string_view data);
  // `text` as a JSON string literal, quoted and escaped (for headers and index files).
  static std::string quote(std::string_view text);

 private:
  struct Pending {
    std::string name;
    Dtype dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Pending> tensors_;
  std::vector<std::pair<std::string, std::string>> metadata_;
};

// Writes `bytes` to `path` (for tests and writers); throws rose::Error on failure.
void write_file(const std::filesystem::path& path, std::string_view bytes);

// float -> IEEE half / bfloat16 with round-to-nearest-even (tests make F16/BF16 checkpoints).
uint16_t f32_to_f16(float value);
uint16_t f32_to_bf16(float value);

}  // namespace rose
