#include "engine/kv/prefix_index.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "engine/common/error.h"

namespace rose {
namespace {

// Parent of block 0: a fixed value, so block 0's key is as well mixed as any other.
constexpr BlockKey kRootKey{0x726f7365696e6665ull, 0x722d707265666978ull};

BlockKey hash_bytes(const void* data, size_t size) {
  const XXH128_hash_t h = XXH3_128bits(data, size);
  return {h.low64, h.high64};
}

void put_key(uint8_t* dst, const BlockKey& key) {
  std::memcpy(dst, &key.lo, 8);
  std::memcpy(dst + 8, &key.hi, 8);
}

}  // namespace

PrefixIndex::PrefixIndex(BlockPool& pool, const std::string& model_id,
                         const std::string& cache_salt)
    : pool_(pool),
      block_size_(pool.block_size()),
      model_key_(hash_bytes(model_id.data(), model_id.size())),
      salt_key_(hash_bytes(cache_salt.data(), cache_salt.size())),
      has_salt_(!cache_salt.empty()),
      block_key_(size_t(pool.num_blocks())),
      block_has_key_(size_t(pool.num_blocks()), 0),
      block_tokens_(size_t(pool.num_blocks()) * size_t(pool.block_size()), 0),
      hash_input_(48 + size_t(pool.block_size()) * sizeof(int32_t)) {
  size_t capacity = 16;
  while (capacity < 2 * size_t(pool.num_blocks())) capacity *= 2;
  table_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  pool_.set_reuse_listener(this);
}

PrefixIndex::~PrefixIndex() { pool_.set_reuse_listener(nullptr); }

BlockKey PrefixIndex::block_key(const BlockKey& parent, int block_index,
                                std::span<const int32_t> tokens) {
  ROSE_ASSERT(int(tokens.size()) == block_size_);
  uint8_t* p = hash_input_.data();
  put_key(p, block_index == 0 ? kRootKey : parent);
  put_key(p + 16, model_key_);
  size_t offset = 32;
  if (block_index == 0 && has_salt_) {
    put_key(p + offset, salt_key_);
    offset += 16;
  }
  const size_t token_bytes = tokens.size() * sizeof(int32_t);
  std::memcpy(p + offset, tokens.data(), token_bytes);
  return hash_bytes(p, offset + token_bytes);
}

void PrefixIndex::extend_keys(std::span<const int32_t> tokens, int num_blocks,
                              std::vector<BlockKey>& keys) {
  ROSE_ASSERT(int64_t(num_blocks) * block_size_ <= int64_t(tokens.size()));
  for (int b = int(keys.size()); b < num_blocks; ++b) {
    const BlockKey parent = b == 0 ? kRootKey : keys[size_t(b) - 1];
    keys.push_back(block_key(parent, b, tokens.subspan(size_t(b) * block_size_, block_size_)));
  }
}

int PrefixIndex::match_prefix(std::span<const int32_t> tokens, std::vector<BlockKey>& keys,
                              std::vector<int32_t>& hits) {
  if (tokens.empty()) return 0;
  const int max_blocks = int((tokens.size() - 1) / size_t(block_size_));
  int matched = 0;
  for (; matched < max_blocks; ++matched) {
    extend_keys(tokens, matched + 1, keys);
    const int32_t block =
        find(keys[size_t(matched)], tokens.subspan(size_t(matched) * block_size_, block_size_));
    if (block < 0) break;
    hits.push_back(block);
  }
  return matched;
}

size_t PrefixIndex::find_slot(const BlockKey& key) const {
  size_t slot = home(key);
  while (table_[slot].block >= 0 && !(table_[slot].key == key)) slot = (slot + 1) & mask_;
  return slot;
}

int32_t PrefixIndex::find(const BlockKey& key, std::span<const int32_t> tokens) const {
  const int32_t block = table_[find_slot(key)].block;
  if (block < 0) return -1;
  const int32_t* stored = block_tokens_.data() + size_t(block) * block_size_;
  if (!std::equal(tokens.begin(), tokens.end(), stored)) return -1;  // a hash collision
  return block;
}

void PrefixIndex::insert(const BlockKey& key, int32_t block, std::span<const int32_t> tokens) {
  ROSE_ASSERT(block >= 0 && block < pool_.num_blocks() && int(tokens.size()) == block_size_);
  if (block_has_key_[block]) return;
  const size_t slot = find_slot(key);
  if (table_[slot].block >= 0) return;
  table_[slot] = Slot{key, block};
  block_key_[block] = key;
  block_has_key_[block] = 1;
  std::copy(tokens.begin(), tokens.end(), block_tokens_.begin() + size_t(block) * block_size_);
  ++num_keys_;
}

void PrefixIndex::erase_slot(size_t slot) {
  // Backward-shift deletion keeps every probe chain unbroken without tombstones.
  size_t next = slot;
  for (;;) {
    table_[slot].block = -1;
    for (;;) {
      next = (next + 1) & mask_;
      if (table_[next].block < 0) return;
      const size_t h = home(table_[next].key);
      const bool stays = slot <= next ? (slot < h && h <= next) : (slot < h || h <= next);
      if (!stays) break;
    }
    table_[slot] = table_[next];
    slot = next;
  }
}

void PrefixIndex::on_block_reused(int32_t block) {
  if (!block_has_key_[block]) return;
  const size_t slot = find_slot(block_key_[block]);
  ROSE_ASSERT(table_[slot].block == block);
  erase_slot(slot);
  block_has_key_[block] = 0;
  --num_keys_;
  ++stats_.evictions;
}

void PrefixIndex::reset() {
  ROSE_ASSERT(pool_.num_used() == 0);
  for (Slot& slot : table_) slot.block = -1;
  std::fill(block_has_key_.begin(), block_has_key_.end(), 0);
  num_keys_ = 0;
}

}  // namespace rose
