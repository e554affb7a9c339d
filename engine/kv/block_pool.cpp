#include "engine/kv/block_pool.h"

#include "engine/common/error.h"

namespace rose {

BlockPool::BlockPool(int num_blocks, int block_size)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      prev_(size_t(num_blocks) + 1),
      next_(size_t(num_blocks) + 1),
      ref_count_(size_t(num_blocks), 0) {
  if (num_blocks < 1) fail("KV cache: {} blocks; at least one block is needed", num_blocks);
  if (block_size < 1) fail("KV cache: block size {} must be positive", block_size);
  const int32_t sentinel = num_blocks_;
  prev_[sentinel] = next_[sentinel] = sentinel;
  for (int32_t b = 0; b < num_blocks_; ++b) push_back(b);
}

void BlockPool::unlink(int32_t block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  --num_free_;
}

void BlockPool::push_back(int32_t block) {
  const int32_t sentinel = num_blocks_;
  const int32_t last = prev_[sentinel];
  prev_[block] = last;
  next_[block] = sentinel;
  next_[last] = block;
  prev_[sentinel] = block;
  ++num_free_;
}

int32_t BlockPool::allocate() {
  const int32_t block = next_[num_blocks_];
  if (block == num_blocks_) return -1;
  unlink(block);
  if (listener_) listener_->on_block_reused(block);
  ref_count_[block] = 1;
  if (num_used() > peak_used_) peak_used_ = num_used();
  return block;
}

void BlockPool::acquire(int32_t block) {
  ROSE_ASSERT(block >= 0 && block < num_blocks_);
  if (ref_count_[block]++ == 0) {
    unlink(block);
    if (num_used() > peak_used_) peak_used_ = num_used();
  }
}

void BlockPool::release(int32_t block) {
  ROSE_ASSERT(block >= 0 && block < num_blocks_ && ref_count_[block] > 0);
  if (--ref_count_[block] == 0) push_back(block);
}

void BlockPool::release_all(std::span<const int32_t> blocks) {
  for (size_t i = blocks.size(); i-- > 0;) release(blocks[i]);
}

std::vector<int32_t> BlockPool::free_list() const {
  std::vector<int32_t> order;
  order.reserve(size_t(num_free_));
  for (int32_t b = next_[num_blocks_]; b != num_blocks_; b = next_[b]) order.push_back(b);
  return order;
}

}  // namespace rose
