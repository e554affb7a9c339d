#pragma once
// The paged KV pool's host bookkeeping: which block ids are in use, by how many requests, and which
// free block is reused next. A block id addresses the same slot range in every layer's K and V slab
// on the backend; this class never touches KV memory (reference/prefix-caching.md).
#include <cstdint>
#include <span>
#include <vector>

namespace rose {

// Told when a free block that still carries a prefix-cache key is taken for reuse, so the key can
// be dropped ("lazy eviction"). PrefixIndex implements it.
class BlockReuseListener {
 public:
  virtual ~BlockReuseListener() = default;
  virtual void on_block_reused(int32_t block) = 0;
};

class BlockPool {
 public:
  BlockPool(int num_blocks, int block_size);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int num_free() const { return num_free_; }
  int num_used() const { return num_blocks_ - num_free_; }
  int peak_used() const { return peak_used_; }
  void reset_peak() { peak_used_ = num_used(); }

  // Pops the least recently freed block (refcount 1), or returns -1 when none is free. A popped
  // block that still carries a cache key is reported to the listener first.
  int32_t allocate();
  // Takes one more reference to `block`; a free block (a prefix-cache hit on a finished request's
  // block) leaves the free list, wherever it sits in it.
  void acquire(int32_t block);
  // Drops one reference; at zero the block joins the back of the free list (most recently used).
  void release(int32_t block);
  // Releases a request's block table tail first, so among blocks freed together the deepest (least
  // shareable) is reused first and a shared head survives longest.
  void release_all(std::span<const int32_t> blocks);  // (num_blocks_of_request,)

  int ref_count(int32_t block) const { return ref_count_[block]; }
  bool is_free(int32_t block) const { return ref_count_[block] == 0; }
  // The free list front to back (next to be reused first). O(num_free); for tests and debugging.
  std::vector<int32_t> free_list() const;

  void set_reuse_listener(BlockReuseListener* listener) { listener_ = listener; }

 private:
  void unlink(int32_t block);
  void push_back(int32_t block);

  int num_blocks_;
  int block_size_;
  int num_free_ = 0;
  int peak_used_ = 0;
  // Intrusive doubly linked free list over block ids; index num_blocks_ is the sentinel.
  std::vector<int32_t> prev_;       // (num_blocks + 1,)
  std::vector<int32_t> next_;       // (num_blocks + 1,)
  std::vector<int32_t> ref_count_;  // (num_blocks,)
  BlockReuseListener* listener_ = nullptr;
};

}  // namespace rose
