// PrefixIndex: chained keys, partial-prefix hits, salt and model isolation, token verification on
// a forced collision, the last-token rule, lazy eviction, stats and reset.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/kv/prefix_index.h"

using rose::BlockKey;
using rose::BlockPool;
using rose::PrefixIndex;

namespace {

constexpr int kBlock = 4;

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Mimics a request computing `tokens`: allocates blocks and registers its full ones.
std::vector<int32_t> fill(BlockPool& pool, PrefixIndex& index, const std::vector<int32_t>& tokens) {
  std::vector<BlockKey> keys;
  const int full = int(tokens.size()) / kBlock;
  index.extend_keys(tokens, full, keys);
  std::vector<int32_t> blocks;
  for (int b = 0; b < (int(tokens.size()) + kBlock - 1) / kBlock; ++b) {
    blocks.push_back(pool.allocate());
    if (b < full) {
      index.insert(keys[size_t(b)], blocks.back(),
                   std::span<const int32_t>(tokens).subspan(size_t(b) * kBlock, kBlock));
    }
  }
  return blocks;
}

std::vector<int32_t> match(PrefixIndex& index, const std::vector<int32_t>& tokens) {
  std::vector<BlockKey> keys;
  std::vector<int32_t> hits;
  const int n = index.match_prefix(tokens, keys, hits);
  CHECK(n == int(hits.size()));
  return hits;
}

}  // namespace

TEST_CASE("keys chain: one key stands for the whole prefix, not just the block's tokens") {
  BlockPool pool(8, kBlock);
  PrefixIndex index(pool, "model", "");
  const std::vector<int32_t> block{1, 2, 3, 4};
  const BlockKey parent_a = index.block_key({}, 0, std::vector<int32_t>{9, 9, 9, 9});
  const BlockKey parent_b = index.block_key({}, 0, std::vector<int32_t>{8, 8, 8, 8});
  CHECK_FALSE(index.block_key(parent_a, 1, block) == index.block_key(parent_b, 1, block));
  CHECK(index.block_key(parent_a, 1, block) == index.block_key(parent_a, 1, block));
  // Same tokens at block 0 and block 1 with the same parent value: block 0 ignores the parent.
  CHECK(index.block_key(parent_a, 0, block) == index.block_key(parent_b, 0, block));

  // A second sequence that shares block 0's tokens but not block 0's ... hits nothing beyond.
  const std::vector<int32_t> seq1{9, 9, 9, 9, 1, 2, 3, 4, 5};
  const std::vector<int32_t> seq2{8, 8, 8, 8, 1, 2, 3, 4, 5};
  fill(pool, index, seq1);
  CHECK(match(index, seq2).empty());  // block 1 is identical, but its parent differs
  CHECK(match(index, seq1).size() == 2);
}

TEST_CASE("a partial prefix hits the leading blocks and stops at the first miss") {
  BlockPool pool(16, kBlock);
  PrefixIndex index(pool, "model", "");
  const std::vector<int32_t> base = iota_tokens(17, 100);  // 4 full blocks + 1 token
  const std::vector<int32_t> blocks = fill(pool, index, base);
  CHECK(index.num_keys() == 4);

  std::vector<int32_t> diverge = base;
  diverge[9] = 7;  // block 2 differs
  CHECK(match(index, diverge) == std::vector<int32_t>{blocks[0], blocks[1]});

  // Block 3 equal again after a miss at block 2: no hit past the first miss (chaining).
  std::vector<int32_t> hole = base;
  hole[5] = 7;  // block 1 differs
  CHECK(match(index, hole) == std::vector<int32_t>{blocks[0]});
}

TEST_CASE("the last prompt token is always computed") {
  BlockPool pool(16, kBlock);
  PrefixIndex index(pool, "model", "");
  const std::vector<int32_t> cached = iota_tokens(12, 0);  // exactly 3 full blocks
  const std::vector<int32_t> blocks = fill(pool, index, cached);
  // The same 12 tokens: at most 11 from cache, rounded down to whole blocks = 2 blocks.
  CHECK(match(index, cached) == std::vector<int32_t>{blocks[0], blocks[1]});
  // One more token: (13 - 1) / 4 = 3 blocks.
  std::vector<int32_t> longer = cached;
  longer.push_back(55);
  CHECK(match(index, longer).size() == 3);
  // A one-token prompt asks nothing of the cache.
  CHECK(match(index, std::vector<int32_t>{0}).empty());
}

TEST_CASE("the cache salt isolates block 0 and, through the chain, every later block") {
  BlockPool pool(16, kBlock);
  PrefixIndex plain(pool, "model", "");
  const std::vector<int32_t> tokens = iota_tokens(9, 3);
  const BlockKey k0 = plain.block_key({}, 0, std::span<const int32_t>(tokens).first(kBlock));
  const BlockKey k1 = plain.block_key(k0, 1, std::span<const int32_t>(tokens).subspan(4, kBlock));
  {
    BlockPool other_pool(4, kBlock);
    PrefixIndex salted(other_pool, "model", "tenant-a");
    PrefixIndex salted_b(other_pool, "model", "tenant-b");
    const BlockKey s0 = salted.block_key({}, 0, std::span<const int32_t>(tokens).first(kBlock));
    CHECK_FALSE(s0 == k0);
    CHECK_FALSE(s0 == salted_b.block_key({}, 0, std::span<const int32_t>(tokens).first(kBlock)));
    // Block 1 with the same parent key: the salt is not mixed in again beyond block 0.
    CHECK(salted.block_key(k0, 1, std::span<const int32_t>(tokens).subspan(4, kBlock)) == k1);
    // A different model id changes every block's key.
    PrefixIndex other_model(other_pool, "other", "");
    CHECK_FALSE(other_model.block_key(k0, 1, std::span<const int32_t>(tokens).subspan(4, kBlock)) ==
                k1);
  }
}

TEST_CASE("a hit verifies the stored token ids, so a forced key collision misses") {
  BlockPool pool(8, kBlock);
  PrefixIndex index(pool, "model", "");
  const std::vector<int32_t> real{1, 2, 3, 4, 5};
  const std::vector<int32_t> impostor{6, 7, 8, 9};
  std::vector<BlockKey> keys;
  index.extend_keys(real, 1, keys);
  // Register a block holding other tokens under the real tokens' key: a collision.
  const int32_t block = pool.allocate();
  index.insert(keys[0], block, impostor);
  CHECK(index.find(keys[0], impostor) == block);
  CHECK(index.find(keys[0], std::span<const int32_t>(real).first(kBlock)) == -1);
  CHECK(match(index, real).empty());
}

TEST_CASE("duplicate keys keep the first block; lazy eviction drops a key only on reuse") {
  BlockPool pool(3, kBlock);
  PrefixIndex index(pool, "model", "");
  const std::vector<int32_t> tokens{1, 2, 3, 4, 5};
  const std::vector<int32_t> first = fill(pool, index, tokens);  // blocks 0 (keyed), 1
  CHECK(index.num_keys() == 1);
  const int32_t dup = pool.allocate();  // block 2
  std::vector<BlockKey> keys;
  index.extend_keys(tokens, 1, keys);
  index.insert(keys[0], dup, std::span<const int32_t>(tokens).first(kBlock));
  CHECK_FALSE(index.has_key(dup));
  CHECK(index.num_keys() == 1);

  pool.release_all(first);  // free list: 1, 0 (tail first)
  pool.release(dup);        // then 2
  CHECK(index.has_key(first[0]));
  CHECK(match(index, tokens) == std::vector<int32_t>{first[0]});  // a free block still hits
  CHECK(pool.allocate() == 1);
  CHECK(index.stats().evictions == 0);  // block 1 had no key
  CHECK(pool.allocate() == 0);          // reusing the keyed block evicts its key
  CHECK(index.stats().evictions == 1);
  CHECK_FALSE(index.has_key(0));
  CHECK(match(index, tokens).empty());
}

TEST_CASE("many keys through the open-addressing table survive interleaved evictions") {
  constexpr int kBlocks = 64;
  BlockPool pool(kBlocks, kBlock);
  PrefixIndex index(pool, "m", "");
  std::vector<std::vector<int32_t>> seqs;
  std::vector<std::vector<int32_t>> blocks;
  for (int i = 0; i < 32; ++i) {
    seqs.push_back(iota_tokens(2 * kBlock + 1, i * 1000));
    blocks.push_back(fill(pool, index, seqs.back()));  // 3 blocks each: 96 > 64, so reuse happens
    pool.release_all(blocks.back());
  }
  // The pool recycles blocks LRU; each recycled keyed block evicts one key.
  CHECK(index.num_keys() + index.stats().evictions == 64);
  CHECK(index.num_keys() <= kBlocks);
  // The most recent sequences still hit fully; whatever hits must be exactly the blocks filled.
  int full_hits = 0;
  for (int i = 0; i < 32; ++i) {
    const std::vector<int32_t> hits = match(index, seqs[size_t(i)]);
    for (size_t b = 0; b < hits.size(); ++b) CHECK(hits[b] == blocks[size_t(i)][b]);
    full_hits += hits.size() == 2 ? 1 : 0;
  }
  CHECK(full_hits >= 16);
  CHECK(match(index, seqs.back()).size() == 2);
}

TEST_CASE("stats count committed lookups; reset drops every key") {
  BlockPool pool(8, kBlock);
  PrefixIndex index(pool, "model", "");
  const std::vector<int32_t> tokens = iota_tokens(9, 0);
  const std::vector<int32_t> blocks = fill(pool, index, tokens);
  index.record_lookup(9, 0);
  index.record_lookup(9, 8);
  CHECK(index.stats().lookups == 2);
  CHECK(index.stats().queried_tokens == 18);
  CHECK(index.stats().hit_tokens == 8);
  index.reset_stats();
  CHECK(index.stats().lookups == 0);
  pool.release_all(blocks);
  CHECK(match(index, tokens).size() == 2);
  index.reset();
  CHECK(index.num_keys() == 0);
  CHECK(match(index, tokens).empty());
}

TEST_CASE("cached_prefix_blocks: what match_prefix would hit, for the router, touching nothing") {
  BlockPool pool(8, kBlock);
  PrefixIndex index(pool, "model", "");
  const std::vector<int32_t> tokens = iota_tokens(10, 1);
  fill(pool, index, tokens);  // two full blocks keyed
  CHECK(index.cached_prefix_blocks(tokens) == 2);
  CHECK(index.cached_prefix_blocks(std::vector<int32_t>(tokens.begin(), tokens.begin() + 8)) == 1);
  std::vector<int32_t> other = tokens;
  other[5] = 99;
  CHECK(index.cached_prefix_blocks(other) == int(match(index, other).size()));
  CHECK(index.cached_prefix_blocks(other) == 1);
  CHECK(index.cached_prefix_blocks({}) == 0);
  CHECK(index.stats().lookups == 0);
  // The chain in block_key.h names blocks as the index does.
  const rose::BlockKeyChain chain("model", "");
  std::vector<BlockKey> keys, chained;
  std::vector<uint8_t> scratch;
  index.extend_keys(tokens, 2, keys);
  chain.extend(tokens, kBlock, 2, chained, scratch);
  CHECK(keys == chained);
}
