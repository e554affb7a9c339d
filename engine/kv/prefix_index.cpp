#include "engine/kv/prefix_index.h"

#include <algorithm>

#include "engine/common/error.h"

namespace rose {

PrefixIndex::PrefixIndex(BlockPool& pool, const std::string& model_id,
                         const std::string& cache_salt)
    : pool_(pool),
      block_size_(pool.block_size()),
      chain_(model_id, cache_salt),
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
  return chain_.key(parent, block_index, tokens, hash_input_);
}

void PrefixIndex::extend_keys(std::span<const int32_t> tokens, int num_blocks,
                              std::vector<BlockKey>& keys) {
  chain_.extend(tokens, block_size_, num_blocks, keys, hash_input_);
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

int PrefixIndex::cached_prefix_blocks(std::span<const int32_t> tokens) const {
  if (tokens.empty()) return 0;
  const int max_blocks = int((tokens.size() - 1) / size_t(block_size_));
  std::vector<BlockKey> keys;
  std::vector<uint8_t> scratch;
  int matched = 0;
  for (; matched < max_blocks; ++matched) {
    chain_.extend(tokens, block_size_, matched + 1, keys, scratch);
    const auto block_tokens = tokens.subspan(size_t(matched) * block_size_, size_t(block_size_));
    if (find(keys[size_t(matched)], block_tokens) < 0) break;
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
