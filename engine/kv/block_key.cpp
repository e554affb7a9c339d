#include "engine/kv/block_key.h"

#include <xxhash.h>

#include <cstring>

#include "engine/common/error.h"

namespace rose {
namespace {

// Parent of block 0: a fixed value, so block 0's key is as well mixed as any other.
constexpr BlockKey kRootKey{0x726f7365696e6665ull, 0x722d707265666978ull};

void put_key(uint8_t* dst, const BlockKey& key) {
  std::memcpy(dst, &key.lo, 8);
  std::memcpy(dst + 8, &key.hi, 8);
}

}  // namespace

BlockKey hash_key_bytes(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits(data, size);
  return {h.low64, h.high64};
}

BlockKeyChain::BlockKeyChain(std::string_view model_id, std::string_view cache_salt)
    : model_key_(hash_key_bytes(model_id.data(), model_id.size())),
      salt_key_(hash_key_bytes(cache_salt.data(), cache_salt.size())),
      has_salt_(!cache_salt.empty()) {}

BlockKey BlockKeyChain::key(const BlockKey& parent, int block_index,
                            std::span<const int32_t> tokens, std::vector<uint8_t>& scratch) const {
  const size_t token_bytes = tokens.size() * sizeof(int32_t);
  scratch.resize(48 + token_bytes);  // parent | model | salt | tokens
  uint8_t* p = scratch.data();
  put_key(p, block_index == 0 ? kRootKey : parent);
  put_key(p + 16, model_key_);
  size_t offset = 32;
  if (block_index == 0 && has_salt_) {
    put_key(p + offset, salt_key_);
    offset += 16;
  }
  std::memcpy(p + offset, tokens.data(), token_bytes);
  return hash_key_bytes(p, offset + token_bytes);
}

void BlockKeyChain::extend(std::span<const int32_t> tokens, int block_size, int num_blocks,
                           std::vector<BlockKey>& keys, std::vector<uint8_t>& scratch) const {
  ROSE_ASSERT(int64_t(num_blocks) * block_size <= int64_t(tokens.size()));
  for (int b = int(keys.size()); b < num_blocks; ++b) {
    const BlockKey parent = b == 0 ? kRootKey : keys[size_t(b) - 1];
    keys.push_back(
        key(parent, b, tokens.subspan(size_t(b) * block_size, size_t(block_size)), scratch));
  }
}

}  // namespace rose
