#include "engine/model/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "engine/common/error.h"
#include "engine/model/safetensors.h"

namespace rose {

static_assert(std::endian::native == std::endian::little,
              "GGUF data is read as little endian; big-endian hosts would need byte swaps");

namespace {

constexpr uint32_t kMagic = 0x46554747;      // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxString = 1ull << 30;  // ggml's limits: 1 GiB strings, 2^30 array elements
constexpr uint64_t kMaxArray = 1ull << 30;
constexpr size_t kMaxTensorName = 63;  // GGML_MAX_NAME (64) including the NUL
constexpr uint32_t kMaxDims = 4;

size_t scalar_size(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;  // string, array: variable
  }
}

template <typename T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Reads the header and metadata sequentially; every read checks the bytes left first, and
// `what` names the field in the error.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& source)
      : bytes_(bytes), source_(source) {}

  size_t position() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }

  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > left()) {
      fail(
          "{}: {} needs {} bytes at offset {}, but the file has only {} left: truncated or not a "
          "GGUF file",
          source_, what, n, pos_, left());
    }
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += size_t(n);
    return p;
  }
  template <typename T>
  T read(const std::string& what) {
    return load<T>(take(sizeof(T), what));
  }
  std::string_view string(const std::string& what) {
    const uint64_t length = read<uint64_t>(what + " length");
    if (length > kMaxString || length > left()) {
      fail("{}: {}: string length {} exceeds the {} bytes left in the file", source_, what, length,
           left());
    }
    return {reinterpret_cast<const char*>(take(length, what)), size_t(length)};
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& source_;
  size_t pos_ = 0;
};

GgufType read_type(Cursor& in, const std::string& source, const std::string& what) {
  const uint32_t type = in.read<uint32_t>(what);
  if (type > uint32_t(GgufType::kF64)) fail("{}: {}: unknown value type {}", source, what, type);
  return GgufType(type);
}

void read_scalar(Cursor& in, GgufType type, GgufValue& value, const std::string& source,
                 const std::string& what) {
  switch (type) {
    case GgufType::kU8:
      value.scalar = uint64_t(in.read<uint8_t>(what));
      return;
    case GgufType::kU16:
      value.scalar = uint64_t(in.read<uint16_t>(what));
      return;
    case GgufType::kU32:
      value.scalar = uint64_t(in.read<uint32_t>(what));
      return;
    case GgufType::kU64:
      value.scalar = in.read<uint64_t>(what);
      return;
    case GgufType::kI8:
      value.scalar = int64_t(in.read<int8_t>(what));
      return;
    case GgufType::kI16:
      value.scalar = int64_t(in.read<int16_t>(what));
      return;
    case GgufType::kI32:
      value.scalar = int64_t(in.read<int32_t>(what));
      return;
    case GgufType::kI64:
      value.scalar = in.read<int64_t>(what);
      return;
    case GgufType::kF32:
      value.scalar = double(in.read<float>(what));
      return;
    case GgufType::kF64:
      value.scalar = in.read<double>(what);
      return;
    case GgufType::kBool: {
      const uint8_t byte = in.read<uint8_t>(what);
      if (byte > 1) fail("{}: {}: bool value {} is neither 0 nor 1", source, what, byte);
      value.scalar = byte == 1;
      return;
    }
    case GgufType::kString:
      value.scalar = in.string(what);
      return;
    case GgufType::kArray:
      break;
  }
  ROSE_ASSERT(false);
}

void read_array(Cursor& in, GgufValue& value, const std::string& source, const std::string& what) {
  value.element_type = read_type(in, source, what + " element type");
  value.count = in.read<uint64_t>(what + " count");
  if (value.element_type == GgufType::kArray) {
    fail("{}: {}: nested arrays are not supported", source, what);
  }
  if (value.count > kMaxArray) {
    fail("{}: {}: array count {} exceeds the limit of {}", source, what, value.count, kMaxArray);
  }
  if (value.element_type == GgufType::kString) {
    // Each string needs at least its 8-byte length: reject impossible counts before reserving.
    if (value.count * 8 > in.left()) {
      fail("{}: {}: {} strings cannot fit in the {} bytes left", source, what, value.count,
           in.left());
    }
    value.strings.reserve(size_t(value.count));
    for (uint64_t i = 0; i < value.count; ++i) {
      value.strings.push_back(in.string(fmt::format("{}[{}]", what, i)));
    }
    return;
  }
  const uint64_t bytes = value.count * scalar_size(value.element_type);
  value.raw = {in.take(bytes, what + " elements"), size_t(bytes)};
  if (value.element_type == GgufType::kBool) {
    for (uint8_t byte : value.raw) {
      if (byte > 1) fail("{}: {}: bool element {} is neither 0 nor 1", source, what, byte);
    }
  }
}

void read_metadata(Cursor& in, uint64_t kv_count, const std::string& source,
                   std::map<std::string, GgufValue, std::less<>>& metadata) {
  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string key(in.string(fmt::format("metadata key #{}", i)));
    if (key.empty()) fail("{}: metadata key #{} is empty", source, i);
    if (metadata.count(key)) fail("{}: metadata key '{}' appears twice", source, key);
    const std::string what = fmt::format("metadata '{}'", key);
    GgufValue value;
    value.type = read_type(in, source, what + " type");
    if (value.type == GgufType::kArray) {
      read_array(in, value, source, what);
    } else {
      read_scalar(in, value.type, value, source, what);
    }
    metadata.emplace(key, std::move(value));
  }
}

GgufTensor read_tensor_info(Cursor& in, uint64_t index, const std::string& source) {
  GgufTensor tensor;
  tensor.name = std::string(in.string(fmt::format("tensor #{} name", index)));
  if (tensor.name.empty()) fail("{}: tensor #{} has an empty name", source, index);
  const std::string what = fmt::format("tensor '{}'", tensor.name);
  if (tensor.name.size() > kMaxTensorName) {
    fail("{}: {}: name is {} bytes, over the limit of {}", source, what, tensor.name.size(),
         kMaxTensorName);
  }
  const uint32_t n_dims = in.read<uint32_t>(what + " n_dims");
  if (n_dims == 0 || n_dims > kMaxDims) {
    fail("{}: {}: n_dims {} is not in 1..{}", source, what, n_dims, kMaxDims);
  }
  uint64_t numel = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t extent = in.read<uint64_t>(what + " dims");
    if (extent > uint64_t(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, extent, &numel) ||
        numel > uint64_t(std::numeric_limits<int64_t>::max())) {
      fail("{}: {}: dimension {} = {} overflows the element count", source, what, d, extent);
    }
    tensor.dims.push_back(int64_t(extent));
  }
  const uint32_t type_id = in.read<uint32_t>(what + " type");
  const auto traits = ggml_type_traits(type_id);
  if (!traits) {
    fail("{}: {}: tensor type {} ({}) is not supported", source, what, type_id,
         ggml_type_name(type_id));
  }
  tensor.type = traits->type;
  if (tensor.dims[0] % traits->block_elems != 0) {
    fail("{}: {}: dimension 0 = {} is not a multiple of the {} block size {}", source, what,
         tensor.dims[0], traits->name, traits->block_elems);
  }
  // numel < 2^63 and block_bytes <= 210 per >= 1 element, so this cannot overflow uint64.
  tensor.bytes = numel / uint64_t(traits->block_elems) * uint64_t(traits->block_bytes);
  tensor.offset = in.read<uint64_t>(what + " offset");
  return tensor;
}

// Offsets: aligned, inside the data section, and no two tensors overlapping.
void check_tensor_ranges(std::vector<GgufTensor>& tensors, std::span<const uint8_t> data,
                         uint64_t alignment, const std::string& source) {
  for (GgufTensor& tensor : tensors) {
    if (tensor.offset % alignment != 0) {
      fail("{}: tensor '{}': offset {} is not a multiple of alignment {}", source, tensor.name,
           tensor.offset, alignment);
    }
    if (tensor.offset > data.size() || tensor.bytes > data.size() - tensor.offset) {
      fail("{}: tensor '{}': bytes [{}, {}) run past the end of the data section ({} bytes)",
           source, tensor.name, tensor.offset, tensor.offset + tensor.bytes, data.size());
    }
    tensor.data = data.data() + tensor.offset;
  }
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& tensor : tensors) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& prev = *by_offset[i - 1];
    const GgufTensor& next = *by_offset[i];
    if (prev.bytes > 0 && next.bytes > 0 && prev.offset + prev.bytes > next.offset) {
      fail("{}: tensor '{}' (bytes [{}, {})) overlaps tensor '{}' (from byte {})", source,
           next.name, next.offset, next.offset + next.bytes, prev.name, prev.offset);
    }
  }
}

uint64_t read_alignment(const std::map<std::string, GgufValue, std::less<>>& metadata,
                        const std::string& source) {
  auto it = metadata.find("general.alignment");
  if (it == metadata.end()) return 32;
  if (it->second.type != GgufType::kU32) {
    fail("{}: metadata 'general.alignment' must be u32, got {}", source,
         gguf_type_name(it->second.type));
  }
  const uint64_t alignment = std::get<uint64_t>(it->second.scalar);
  if (alignment == 0 || !std::has_single_bit(alignment)) {
    fail("{}: metadata 'general.alignment' = {} is not a power of two", source, alignment);
  }
  return alignment;
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  static constexpr const char* kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};
  const uint32_t index = uint32_t(type);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto mapping = std::make_shared<MappedFile>(path);
  GgufFile file = parse(mapping->bytes(), path.string());
  file.mapping_ = std::move(mapping);
  return file;
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string source) {
  GgufFile file;
  file.source_ = std::move(source);
  const std::string& src = file.source_;
  Cursor in(bytes, src);
  const uint32_t magic = in.read<uint32_t>("magic");
  if (magic != kMagic) fail("{}: not a GGUF file (magic {:#010x})", src, magic);
  file.version_ = in.read<uint32_t>("version");
  if ((file.version_ & 0xFFFF) == 0) fail("{}: big-endian GGUF files are not supported", src);
  if (file.version_ < 2 || file.version_ > 3) {
    fail("{}: GGUF version {} is not supported (only 2 and 3)", src, file.version_);
  }
  const uint64_t tensor_count = in.read<uint64_t>("tensor_count");
  const uint64_t kv_count = in.read<uint64_t>("kv_count");
  // Smallest possible entries: a KV is 8 (key length) + 4 (type) + 1 bytes, a tensor info is
  // 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset) bytes.
  if (kv_count > in.left() / 13) {
    fail("{}: kv_count {} cannot fit in the {} bytes left", src, kv_count, in.left());
  }
  read_metadata(in, kv_count, src, file.metadata_);
  if (tensor_count > in.left() / 32) {
    fail("{}: tensor_count {} cannot fit in the {} bytes left", src, tensor_count, in.left());
  }
  file.alignment_ = read_alignment(file.metadata_, src);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensor tensor = read_tensor_info(in, i, src);
    if (file.tensor_index_.count(tensor.name)) {
      fail("{}: tensor '{}' appears twice", src, tensor.name);
    }
    file.tensor_index_.emplace(tensor.name, file.tensors_.size());
    file.tensors_.push_back(std::move(tensor));
  }
  const uint64_t data_start =
      (in.position() + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  if (data_start > bytes.size() && !file.tensors_.empty()) {
    fail("{}: data section starts at byte {}, past the end of the file ({} bytes)", src, data_start,
         bytes.size());
  }
  const auto data =
      data_start >= bytes.size() ? std::span<const uint8_t>() : bytes.subspan(size_t(data_start));
  check_tensor_ranges(file.tensors_, data, file.alignment_, src);
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* found = find_tensor(name);
  if (!found) fail("{}: missing tensor '{}'", source_, name);
  return *found;
}

void GgufFile::read_f32(const GgufTensor& tensor, std::span<float> dst) const {
  ROSE_ASSERT(int64_t(dst.size()) == tensor.numel());
  dequantize(tensor.type, tensor.data, dst);
}

}  // namespace rose
