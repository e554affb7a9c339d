#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "engine/common/error.h"
#include "engine/common/json_string.h"

namespace rose {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little endian; big-endian hosts would need byte swaps");

namespace {

// safetensors' own reader refuses headers above 100 MB; a larger one is a broken or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeEntry {
  Dtype dtype;
  const char* name;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::kBool, "BOOL", 1},      {Dtype::kU8, "U8", 1},          {Dtype::kI8, "I8", 1},
    {Dtype::kF8E5M2, "F8_E5M2", 1}, {Dtype::kF8E4M3, "F8_E4M3", 1}, {Dtype::kI16, "I16", 2},
    {Dtype::kU16, "U16", 2},        {Dtype::kF16, "F16", 2},        {Dtype::kBF16, "BF16", 2},
    {Dtype::kI32, "I32", 4},        {Dtype::kU32, "U32", 4},        {Dtype::kF32, "F32", 4},
    {Dtype::kF64, "F64", 8},        {Dtype::kI64, "I64", 8},        {Dtype::kU64, "U64", 8},
};

const DtypeEntry& dtype_entry(Dtype dtype) {
  for (const DtypeEntry& entry : kDtypes) {
    if (entry.dtype == dtype) return entry;
  }
  ROSE_ASSERT(false);
  return kDtypes[0];
}

template <typename T>
T load(const uint8_t* src) {
  T value;
  std::memcpy(&value, src, sizeof(T));
  return value;
}

float f16_to_f32(uint16_t half) {
  const uint32_t sign = uint32_t(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in fp32.
    const float magnitude = float(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

float bf16_to_f32(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

// OCP FP8 E4M3 ("fn"): bias 7, no infinities, S.1111.111 is NaN.
float f8e4m3_to_f32(uint8_t bits) {
  const bool negative = bits & 0x80;
  const int exponent = (bits >> 3) & 0xF;
  const int mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(float(mantissa), -9);
  } else {
    magnitude = std::ldexp(float(8 + mantissa), exponent - 10);
  }
  return negative ? -magnitude : magnitude;
}

// E5M2 is the top byte of an IEEE half.
float f8e5m2_to_f32(uint8_t bits) { return f16_to_f32(uint16_t(bits) << 8); }

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: {}", path.string(), std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

}  // namespace

size_t dtype_size(Dtype dtype) { return dtype_entry(dtype).size; }

const char* dtype_name(Dtype dtype) { return dtype_entry(dtype).name; }

bool parse_dtype(std::string_view name, Dtype* dtype) {
  for (const DtypeEntry& entry : kDtypes) {
    if (name == entry.name) {
      *dtype = entry.dtype;
      return true;
    }
  }
  return false;
}

void convert_to_f32(Dtype dtype, const uint8_t* src, std::span<float> dst) {
  const size_t n = dst.size();
  float* out = dst.data();
  switch (dtype) {
    case Dtype::kF32:
      if (n) std::memcpy(out, src, n * sizeof(float));
      return;
    case Dtype::kBF16:
      for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load<uint16_t>(src + 2 * i));
      return;
    case Dtype::kF16:
      for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(load<uint16_t>(src + 2 * i));
      return;
    case Dtype::kF64:
      for (size_t i = 0; i < n; ++i) out[i] = float(load<double>(src + 8 * i));
      return;
    case Dtype::kF8E4M3:
      for (size_t i = 0; i < n; ++i) out[i] = f8e4m3_to_f32(src[i]);
      return;
    case Dtype::kF8E5M2:
      for (size_t i = 0; i < n; ++i) out[i] = f8e5m2_to_f32(src[i]);
      return;
    case Dtype::kBool:
      for (size_t i = 0; i < n; ++i) out[i] = src[i] ? 1.0f : 0.0f;
      return;
    case Dtype::kU8:
      for (size_t i = 0; i < n; ++i) out[i] = float(src[i]);
      return;
    case Dtype::kI8:
      for (size_t i = 0; i < n; ++i) out[i] = float(int8_t(src[i]));
      return;
    case Dtype::kI16:
      for (size_t i = 0; i < n; ++i) out[i] = float(load<int16_t>(src + 2 * i));
      return;
    case Dtype::kU16:
      for (size_t i = 0; i < n; ++i) out[i] = float(load<uint16_t>(src + 2 * i));
      return;
    case Dtype::kI32:
      for (size_t i = 0; i < n; ++i) out[i] = float(load<int32_t>(src + 4 * i));
      return;
    case Dtype::kU32:
      for (size_t i = 0; i < n; ++i) out[i] = float(load<uint32_t>(src + 4 * i));
      return;
    case Dtype::kI64:
      for (size_t i = 0; i < n; ++i) out[i] = float(load<int64_t>(src + 8 * i));
      return;
    case Dtype::kU64:
      for (size_t i = 0; i < n; ++i) out[i] = float(load<uint64_t>(src + 8 * i));
      return;
  }
  ROSE_ASSERT(false);
}

uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) return sign | (magnitude > 0x7F800000u ? 0x7E00u : 0x7C00u);
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;  // rounds past 65504: infinity
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half: count units of 2^-24 (exact scaling), ties to even.
    const float units = std::nearbyint(std::bit_cast<float>(magnitude) * 16777216.0f);
    return sign | uint16_t(units);
  }
  uint32_t half = ((((magnitude >> 23) - 112u) << 10) | ((magnitude & 0x7FFFFFu) >> 13));
  const uint32_t rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return sign | uint16_t(half);
}

uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((bits >> 16) | 0x40u);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// ---- MappedFile ----

MappedFile::MappedFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat {}: {}", path.string(), std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path.string());
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      fail("cannot mmap {}: {}", path.string(), std::strerror(err));
    }
    data_ = static_cast<const uint8_t*>(mapping);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

// ---- SafetensorsFile ----

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto mapping = std::make_shared<MappedFile>(path);
  SafetensorsFile file = parse(mapping->bytes(), path.string());
  file.mapping_ = std::move(mapping);
  return file;
}

namespace {

// The 8-byte little-endian length that opens the file, checked against the file's size and the
// header limit before any of the header is read.
uint64_t checked_header_length(std::span<const uint8_t> bytes, const std::string& src) {
  if (bytes.size() < 8) {
    fail("{}: not a safetensors file: {} bytes, too short for the 8-byte header length", src,
         bytes.size());
  }
  const uint64_t header_len = load<uint64_t>(bytes.data());
  if (header_len > bytes.size() - 8) {
    fail(
        "{}: header length {} runs past the end of the file ({} bytes): truncated or not a "
        "safetensors file",
        src, header_len, bytes.size());
  }
  if (header_len > kMaxHeaderBytes) {
    fail("{}: header length {} exceeds the {} byte limit", src, header_len, kMaxHeaderBytes);
  }
  return header_len;
}

// The header as a JSON object; the DOM lives in `parser` (it copies what it keeps, so the padded
// copy of the header can go when this returns).
simdjson::dom::object parse_header_json(simdjson::dom::parser& parser,
                                        std::span<const uint8_t> header, const std::string& src) {
  const simdjson::padded_string text(reinterpret_cast<const char*>(header.data()), header.size());
  simdjson::dom::element root;
  if (auto err = parser.parse(text).get(root)) {
    fail("{}: header is not valid JSON: {}", src, simdjson::error_message(err));
  }
  simdjson::dom::object entries;
  if (root.get_object().get(entries)) fail("{}: header is not a JSON object", src);
  return entries;
}

// __metadata__: an object of strings, nothing else.
void read_metadata(simdjson::dom::element value, const std::string& src,
                   std::map<std::string, std::string>& metadata) {
  simdjson::dom::object fields;
  if (value.get_object().get(fields)) fail("{}: __metadata__ must be an object of strings", src);
  for (simdjson::dom::key_value_pair item : fields) {
    std::string_view text;
    if (item.value.get_string().get(text)) {
      fail("{}: __metadata__ field '{}' must be a string", src, item.key);
    }
    metadata[std::string(item.key)] = std::string(text);
  }
}

// Reads 'shape' into info.shape and returns the bytes dtype x shape needs. Overflow-checked: a
// hostile shape must not wrap around to a small byte count.
uint64_t read_shape(simdjson::dom::object entry, TensorInfo& info, const std::string& src) {
  const std::string& name = info.name;
  simdjson::dom::array shape;
  if (entry["shape"].get_array().get(shape)) {
    fail("{}: tensor '{}': missing or non-array 'shape'", src, name);
  }
  uint64_t numel = 1;
  for (simdjson::dom::element dim : shape) {
    uint64_t extent;
    if (dim.get_uint64().get(extent) || extent > uint64_t(std::numeric_limits<int64_t>::max())) {
      fail("{}: tensor '{}': shape entries must be non-negative integers", src, name);
    }
    if (__builtin_mul_overflow(numel, extent, &numel)) {
      fail("{}: tensor '{}': shape overflows", src, name);
    }
    info.shape.push_back(int64_t(extent));
  }
  uint64_t expected_bytes;
  if (__builtin_mul_overflow(numel, uint64_t(dtype_size(info.dtype)), &expected_bytes) ||
      expected_bytes > uint64_t(std::numeric_limits<int64_t>::max())) {
    fail("{}: tensor '{}': shape {} overflows", src, name, shape_string(info.shape));
  }
  return expected_bytes;
}

// Reads 'data_offsets' into info and checks that the range lies inside the data buffer and holds
// exactly the bytes the dtype and shape need.
void read_data_offsets(simdjson::dom::object entry, TensorInfo& info, uint64_t expected_bytes,
                       uint64_t buffer_size, const std::string& src) {
  const std::string& name = info.name;
  simdjson::dom::array offsets;
  if (entry["data_offsets"].get_array().get(offsets)) {
    fail("{}: tensor '{}': missing or non-array 'data_offsets'", src, name);
  }
  uint64_t bounds[2];
  size_t count = 0;
  for (simdjson::dom::element offset : offsets) {
    if (count < 2 && offset.get_uint64().get(bounds[count])) {
      fail("{}: tensor '{}': data_offsets must be non-negative integers", src, name);
    }
    ++count;
  }
  if (count != 2) {
    fail("{}: tensor '{}': data_offsets must be [begin, end], got {} values", src, name, count);
  }
  info.data_begin = bounds[0];
  info.data_end = bounds[1];
  if (info.data_end < info.data_begin) {
    fail("{}: tensor '{}': data_offsets [{}, {}] end before they begin", src, name, info.data_begin,
         info.data_end);
  }
  if (info.data_end > buffer_size) {
    fail(
        "{}: tensor '{}': data_offsets [{}, {}] run past the end of the data buffer ({} "
        "bytes): truncated file?",
        src, name, info.data_begin, info.data_end, buffer_size);
  }
  if (info.nbytes() != expected_bytes) {
    fail("{}: tensor '{}': data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", src, name,
         info.data_begin, info.data_end, info.nbytes(), dtype_name(info.dtype),
         shape_string(info.shape), expected_bytes);
  }
}

// One tensor's header entry: {dtype, shape, data_offsets}, each field checked in that order.
TensorInfo read_tensor_entry(const std::string& name, simdjson::dom::element value,
                             uint64_t buffer_size, const std::string& src) {
  simdjson::dom::object entry;
  if (value.get_object().get(entry)) {
    fail("{}: tensor '{}': entry must be an object with dtype, shape, data_offsets", src, name);
  }
  TensorInfo info;
  info.name = name;
  std::string_view dtype_text;
  if (entry["dtype"].get_string().get(dtype_text)) {
    fail("{}: tensor '{}': missing or non-string 'dtype'", src, name);
  }
  if (!parse_dtype(dtype_text, &info.dtype)) {
    fail("{}: tensor '{}': unknown dtype '{}'", src, name, dtype_text);
  }
  const uint64_t expected_bytes = read_shape(entry, info, src);
  read_data_offsets(entry, info, expected_bytes, buffer_size, src);
  return info;
}

// No two tensors may share bytes: sort the non-empty ranges and compare neighbours.
void check_no_overlap(const std::vector<TensorInfo>& tensors, const std::string& src) {
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors) {
    if (t.nbytes() > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data_begin < b->data_begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (cur.data_begin < prev.data_end) {
      fail("{}: tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]", src, cur.name,
           cur.data_begin, cur.data_end, prev.name, prev.data_begin, prev.data_end);
    }
  }
}

}  // namespace

SafetensorsFile SafetensorsFile::parse(std::span<const uint8_t> bytes, std::string source) {
  SafetensorsFile file;
  file.source_ = std::move(source);
  const std::string& src = file.source_;
  const uint64_t header_len = checked_header_length(bytes, src);
  simdjson::dom::parser parser;
  const simdjson::dom::object entries =
      parse_header_json(parser, bytes.subspan(8, size_t(header_len)), src);
  file.data_buffer_ = bytes.subspan(8 + size_t(header_len));
  const uint64_t buffer_size = file.data_buffer_.size();

  bool seen_metadata = false;
  for (simdjson::dom::key_value_pair field : entries) {
    std::string name(field.key);
    if (name == "__metadata__") {
      if (seen_metadata) fail("{}: __metadata__ appears twice", src);
      seen_metadata = true;
      read_metadata(field.value, src, file.metadata_);
      continue;
    }
    if (file.index_.count(name)) fail("{}: tensor '{}' appears twice in the header", src, name);
    TensorInfo info = read_tensor_entry(name, field.value, buffer_size, src);
    file.index_.emplace(name, file.tensors_.size());
    file.tensors_.push_back(std::move(info));
  }
  check_no_overlap(file.tensors_, src);
  return file;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& SafetensorsFile::get(std::string_view name) const {
  const TensorInfo* tensor = find(name);
  if (!tensor) fail("{}: missing tensor '{}'", source_, name);
  return *tensor;
}

std::span<const uint8_t> SafetensorsFile::data(const TensorInfo& tensor) const {
  ROSE_ASSERT(tensor.data_end <= data_buffer_.size() && tensor.data_begin <= tensor.data_end);
  return data_buffer_.subspan(size_t(tensor.data_begin), size_t(tensor.nbytes()));
}

void SafetensorsFile::read_f32(const TensorInfo& tensor, std::span<float> dst) const {
  ROSE_ASSERT(int64_t(dst.size()) == tensor.numel());
  convert_to_f32(tensor.dtype, data(tensor).data(), dst);
}

// ---- SafetensorsCheckpoint ----

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  fs::path target = path;
  if (fs::is_directory(path)) {
    if (fs::exists(path / "model.safetensors.index.json")) {
      target = path / "model.safetensors.index.json";
    } else if (fs::exists(path / "model.safetensors")) {
      target = path / "model.safetensors";
    } else {
      fail("{}: no model.safetensors or model.safetensors.index.json in this folder",
           path.string());
    }
  }
  SafetensorsCheckpoint checkpoint;
  checkpoint.source_ = target.string();
  const std::string& src = checkpoint.source_;

  const std::string name = target.filename().string();
  const bool is_index = name.size() > 5 && name.ends_with(".json");
  if (!is_index) {
    checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(target)));
    const SafetensorsFile* file = checkpoint.files_.back().get();
    for (const TensorInfo& t : file->tensors()) checkpoint.entries_[t.name] = {file, &t};
    return checkpoint;
  }

  const std::string text = read_whole_file(target);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(simdjson::padded_string(text)).get(root)) {
    fail("{}: not valid JSON: {}", src, simdjson::error_message(err));
  }
  simdjson::dom::object weight_map;
  if (root["weight_map"].get_object().get(weight_map)) {
    fail("{}: missing or non-object 'weight_map'", src);
  }
  // Shard name -> tensors it should hold, so each shard is opened once.
  std::map<std::string, std::vector<std::string>> shards;
  for (simdjson::dom::key_value_pair item : weight_map) {
    std::string_view shard;
    if (item.value.get_string().get(shard)) {
      fail("{}: weight_map['{}'] must be a file name string", src, item.key);
    }
    const fs::path shard_path(shard);
    if (shard.empty() || shard_path.is_absolute() || shard_path.has_parent_path()) {
      fail("{}: weight_map['{}'] = '{}' must be a file name beside the index", src, item.key,
           shard);
    }
    shards[std::string(shard)].push_back(std::string(item.key));
  }
  if (shards.empty()) fail("{}: weight_map lists no tensors", src);
  const fs::path folder = target.parent_path();
  for (const auto& [shard, tensor_names] : shards) {
    const fs::path shard_path = folder / shard;
    if (!fs::exists(shard_path)) {
      fail("{}: shard '{}' (holding '{}') does not exist", src, shard, tensor_names.front());
    }
    checkpoint.files_.push_back(
        std::make_unique<SafetensorsFile>(SafetensorsFile::open(shard_path)));
    const SafetensorsFile* file = checkpoint.files_.back().get();
    for (const std::string& tensor_name : tensor_names) {
      const TensorInfo* tensor = file->find(tensor_name);
      if (!tensor) {
        fail("{}: weight_map puts tensor '{}' in '{}', but that shard has no such tensor", src,
             tensor_name, shard);
      }
      checkpoint.entries_[tensor_name] = {file, tensor};
    }
  }
  return checkpoint;
}

SafetensorsCheckpoint::Entry SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = entries_.find(std::string(name));
  if (it == entries_.end()) return {nullptr, nullptr};
  return it->second;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> result;
  result.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) result.push_back(name);
  std::sort(result.begin(), result.end());
  return result;
}

// ---- SafetensorsWriter ----

std::string SafetensorsWriter::quote(std::string_view text) { return json_quote(text); }

void SafetensorsWriter::add(std::string name, Dtype dtype, std::vector<int64_t> shape,
                            std::span<const uint8_t> bytes) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  ROSE_ASSERT(uint64_t(numel) * dtype_size(dtype) == bytes.size());
  tensors_.push_back({std::move(name), dtype, std::move(shape),
                      std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())});
}

void SafetensorsWriter::add_f32(std::string name, std::vector<int64_t> shape,
                                std::span<const float> values) {
  add(std::move(name), Dtype::kF32, std::move(shape),
      {reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()});
}

void SafetensorsWriter::add_metadata(std::string key, std::string value) {
  metadata_.emplace_back(std::move(key), std::move(value));
}

std::string SafetensorsWriter::serialize() const {
  std::string header = "{";
  bool first = true;
  if (!metadata_.empty()) {
    header += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata_.size(); ++i) {
      if (i) header += ",";
      header += quote(metadata_[i].first) + ":" + quote(metadata_[i].second);
    }
    header += "}";
    first = false;
  }
  std::string data;
  for (const Pending& t : tensors_) {
    if (!first) header += ",";
    first = false;
    std::string dims;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i) dims += ',';
      dims += std::to_string(t.shape[i]);
    }
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          quote(t.name), dtype_name(t.dtype), dims, data.size(),
                          data.size() + t.bytes.size());
    data += t.bytes;
  }
  header += "}";
  // Pad so the data buffer starts 8-byte aligned, as the reference writer does.
  while ((8 + header.size()) % 8 != 0) header += ' ';
  return raw(header, data);
}

void SafetensorsWriter::write(const std::filesystem::path& path) const {
  write_file(path, serialize());
}

std::string SafetensorsWriter::raw(std::string_view header_json, std::string_view data) {
  std::string out(8, '\0');
  const uint64_t length = header_json.size();
  std::memcpy(out.data(), &length, 8);
  out += header_json;
  out += data;
  return out;
}

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write {}: {}", path.string(), std::strerror(errno));
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) fail("cannot write {}: {}", path.string(), std::strerror(errno));
}

}  // namespace rose
