#pragma once
// Prefix cache index (reference/prefix-caching.md): a full block's key is XXH3-128 of (parent key,
// the block's token ids, extra keys: the model id in every block, the cache salt in block 0 only),
// so one key stands for the whole prefix up to that block (the chain is engine/kv/block_key.h). The
// index maps a key to the one block that holds it and keeps the block's token ids, which every hit
// compares, so a hash collision can never serve wrong KV. Keys live on blocks until the pool reuses
// them (lazy eviction).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/kv/block_key.h"
#include "engine/kv/block_pool.h"

namespace rose {

class PrefixIndex : public BlockReuseListener {
 public:
  // Registers itself as `pool`'s reuse listener; `pool` must outlive the index.
  PrefixIndex(BlockPool& pool, const std::string& model_id, const std::string& cache_salt);
  ~PrefixIndex() override;

  // Key of block `block_index` of a sequence; `parent` is the previous block's key (ignored for
  // block 0). `tokens`: (block_size,) the block's token ids.
  BlockKey block_key(const BlockKey& parent, int block_index, std::span<const int32_t> tokens);

  // Extends `keys` (one per full block, left to right) until it covers the first `num_blocks`
  // full blocks of `tokens`. Each key is computed once per request, however often it is asked for.
  void extend_keys(std::span<const int32_t> tokens, int num_blocks, std::vector<BlockKey>& keys);

  // Longest cached prefix of `tokens` in whole blocks, leaving at least the last token to compute:
  // at most (tokens.size() - 1) / block_size blocks. Appends the hit blocks to `hits` (block ids)
  // and returns how many; refcounts are untouched (the caller acquires them once it commits).
  int match_prefix(std::span<const int32_t> tokens, std::vector<BlockKey>& keys,
                   std::vector<int32_t>& hits);

  // What match_prefix would hit now, without touching keys, stats or scratch: the router's precise
  // policy asks every replica this. O(hit blocks + 1) hashes.
  int cached_prefix_blocks(std::span<const int32_t> tokens) const;

  // The block holding `key` whose stored tokens equal `tokens` (block_size,), or -1.
  int32_t find(const BlockKey& key, std::span<const int32_t> tokens) const;
  // Makes `block` (in use, just filled or being filled this step with `tokens`) findable under
  // `key`. No-op when the key is already held by a block or `block` already carries a key: two
  // requests that filled identical blocks keep their own copies and the index names one of them.
  // Tests may pass a key that does not belong to `tokens` to force a collision.
  void insert(const BlockKey& key, int32_t block, std::span<const int32_t> tokens);
  bool has_key(int32_t block) const { return block_has_key_[block] != 0; }
  int num_keys() const { return num_keys_; }

  // Drops every key; only allowed when no block is in use (between runs).
  void reset();

  // BlockReuseListener: a free block with a key is being reused; its key goes (counts an eviction).
  void on_block_reused(int32_t block) override;

  struct Stats {
    int64_t lookups = 0;
    int64_t queried_tokens = 0;
    int64_t hit_tokens = 0;
    int64_t evictions = 0;
  };
  // An admission that consulted the index, once it is committed.
  void record_lookup(int64_t queried_tokens, int64_t hit_tokens) {
    ++stats_.lookups;
    stats_.queried_tokens += queried_tokens;
    stats_.hit_tokens += hit_tokens;
  }
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  struct Slot {
    BlockKey key;
    int32_t block = -1;  // -1: empty
  };
  size_t home(const BlockKey& key) const { return size_t(key.lo) & mask_; }
  size_t find_slot(const BlockKey& key) const;  // slot holding key, or an empty slot
  void erase_slot(size_t slot);

  BlockPool& pool_;
  int block_size_;
  BlockKeyChain chain_;
  // Open addressing with linear probing, at most half full: a key can be held by at most one
  // block, so capacity 2 * num_blocks bounds the load and nothing allocates after construction.
  std::vector<Slot> table_;  // (capacity,) capacity a power of two
  size_t mask_ = 0;
  std::vector<BlockKey> block_key_;     // (num_blocks,) valid where block_has_key_
  std::vector<uint8_t> block_has_key_;  // (num_blocks,)
  std::vector<int32_t> block_tokens_;   // (num_blocks, block_size) token ids of keyed blocks
  std::vector<uint8_t> hash_input_;     // scratch of chain_.key
  int num_keys_ = 0;
  Stats stats_;
};

}  // namespace rose
