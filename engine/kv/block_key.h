#pragma once
// The prefix-cache key chain (reference/prefix-caching.md), shared by a replica's PrefixIndex and
// the router's precise policy so both name a block identically: a full block's key is XXH3-128 of
// (parent key, model key, cache salt key in block 0 only, the block's token ids).
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rose {

struct BlockKey {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const BlockKey&) const = default;
};

// XXH3-128 of a byte range, as a key.
BlockKey hash_key_bytes(const void* data, size_t size);

class BlockKeyChain {
 public:
  BlockKeyChain(std::string_view model_id, std::string_view cache_salt);

  // Key of block `block_index`; `parent` is the previous block's key (ignored for block 0).
  // `tokens`: (block_size,). `scratch` is reused between calls so hashing does not allocate.
  BlockKey key(const BlockKey& parent, int block_index, std::span<const int32_t> tokens,
               std::vector<uint8_t>& scratch) const;

  // Appends keys to `keys` until it holds one per block of the first `num_blocks` full blocks of
  // `tokens` (blocks of `block_size` tokens).
  void extend(std::span<const int32_t> tokens, int block_size, int num_blocks,
              std::vector<BlockKey>& keys, std::vector<uint8_t>& scratch) const;

 private:
  BlockKey model_key_;
  BlockKey salt_key_;
  bool has_salt_;
};

}  // namespace rose
