// BlockPool: refcounts, the LRU free list, tail-first freeing, reviving a free block, exhaustion.
#include <doctest/doctest.h>

#include <vector>

#include "engine/common/error.h"
#include "engine/kv/block_pool.h"

using rose::BlockPool;

namespace {

struct RecordingListener : rose::BlockReuseListener {
  std::vector<int32_t> reused;
  void on_block_reused(int32_t block) override { reused.push_back(block); }
};

}  // namespace

TEST_CASE("a fresh pool hands out blocks in id order and reports exhaustion with -1") {
  BlockPool pool(4, 16);
  CHECK(pool.num_free() == 4);
  CHECK(pool.free_list() == std::vector<int32_t>{0, 1, 2, 3});
  for (int32_t expected = 0; expected < 4; ++expected) CHECK(pool.allocate() == expected);
  CHECK(pool.num_free() == 0);
  CHECK(pool.num_used() == 4);
  CHECK(pool.allocate() == -1);  // exhausted: reported, nothing aborts
  CHECK(pool.num_used() == 4);
  CHECK(pool.peak_used() == 4);
}

TEST_CASE("refcounts: a block returns to the free list only when the last reference goes") {
  BlockPool pool(3, 16);
  const int32_t b = pool.allocate();
  CHECK(pool.ref_count(b) == 1);
  pool.acquire(b);
  CHECK(pool.ref_count(b) == 2);
  pool.release(b);
  CHECK(pool.ref_count(b) == 1);
  CHECK_FALSE(pool.is_free(b));
  CHECK(pool.num_free() == 2);
  pool.release(b);
  CHECK(pool.is_free(b));
  CHECK(pool.num_free() == 3);
  // Freed blocks go to the back: the never-used blocks 1 and 2 are reused before block 0.
  CHECK(pool.free_list() == std::vector<int32_t>{1, 2, 0});
}

TEST_CASE("freeing a request's blocks tail first puts its deepest block first in line") {
  BlockPool pool(6, 16);
  std::vector<int32_t> request;
  for (int i = 0; i < 4; ++i) request.push_back(pool.allocate());  // 0 1 2 3
  pool.release_all(request);
  CHECK(pool.free_list() == std::vector<int32_t>{4, 5, 3, 2, 1, 0});
  // The next allocations take the untouched blocks, then the old tail, and the head (block 0,
  // the most shareable prefix) last.
  std::vector<int32_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(pool.allocate());
  CHECK(order == std::vector<int32_t>{4, 5, 3, 2, 1, 0});
}

TEST_CASE("reviving a free block takes it out of the middle of the LRU list") {
  BlockPool pool(5, 16);
  std::vector<int32_t> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(pool.allocate());
  pool.release_all(blocks);
  CHECK(pool.free_list() == std::vector<int32_t>{4, 3, 2, 1, 0});
  pool.acquire(2);  // a prefix-cache hit on a free block
  CHECK(pool.ref_count(2) == 1);
  CHECK(pool.num_free() == 4);
  CHECK(pool.free_list() == std::vector<int32_t>{4, 3, 1, 0});
  pool.acquire(4);  // the front
  pool.acquire(0);  // the back
  CHECK(pool.free_list() == std::vector<int32_t>{3, 1});
  CHECK(pool.allocate() == 3);
  CHECK(pool.allocate() == 1);
  CHECK(pool.allocate() == -1);
}

TEST_CASE("peak usage and the reuse listener") {
  BlockPool pool(3, 8);
  RecordingListener listener;
  pool.set_reuse_listener(&listener);
  const int32_t a = pool.allocate();
  const int32_t b = pool.allocate();
  CHECK(pool.peak_used() == 2);
  pool.release(a);
  pool.release(b);
  CHECK(pool.peak_used() == 2);
  pool.reset_peak();
  CHECK(pool.peak_used() == 0);
  CHECK(pool.allocate() == 2);
  CHECK(pool.allocate() == a);
  CHECK(listener.reused == std::vector<int32_t>{a, b, 2, a});  // every pop, in order
  CHECK(pool.peak_used() == 2);
}

TEST_CASE("a pool without blocks is a user error") {
  CHECK_THROWS_AS(BlockPool(0, 16), rose::Error);
  CHECK_THROWS_AS(BlockPool(4, 0), rose::Error);
}
