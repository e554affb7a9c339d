#pragma once
// The router-side approximate prefix index of seed 004 (GAIE's prefix-cache scorer): a prompt is
// cut into fixed-size token chunks, chunk i hashed as XXH64(chunk i's token ids, seed = hash of
// chunk i-1) from XXH64(model id) as the root, so one hash stands for the whole prefix up to its
// chunk. Each replica has an LRU of the hashes routed to it, sized like its KV pool (a larger index
// predicts hits the replica has already evicted, a smaller one misses hits it still has); a reverse
// map names the replicas holding a hash. Written on route, never told by the replicas.
#include <cstdint>
#include <list>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rose {

class ApproxPrefixIndex {
 public:
  // `capacity_chunks`: (num_replicas,) each replica's LRU size in chunks, >= 1.
  ApproxPrefixIndex(std::string_view model_id, int chunk_tokens, int max_chunks,
                    std::vector<int64_t> capacity_chunks);

  int num_replicas() const { return int(lru_.size()); }
  int chunk_tokens() const { return chunk_tokens_; }

  // (min(prompt_len / chunk_tokens, max_chunks),) chained hashes of the full chunks; a trailing
  // partial chunk is left out.
  std::vector<uint64_t> chunk_hashes(std::span<const int32_t> prompt) const;

  // matched[r] = how many leading `hashes` replica r holds (stops at its first miss).
  // `matched` is resized to (num_replicas,).
  void match(std::span<const uint64_t> hashes, std::vector<int>& matched) const;

  // Marks `hashes` as cached on `replica`, most recently used; the deepest chunk is touched first
  // so that a prefix's head outlives its tail, as in the replica's pool. Evicts LRU hashes past the
  // replica's capacity.
  void record(std::span<const uint64_t> hashes, int replica);

  int64_t size(int replica) const { return int64_t(lru_[size_t(replica)].where.size()); }
  bool holds(int replica, uint64_t hash) const;

 private:
  struct ReplicaLru {
    std::list<uint64_t> order;  // front: most recently used
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
    int64_t capacity = 0;
  };
  void touch(ReplicaLru& lru, uint64_t hash, int replica);
  void drop_owner(uint64_t hash, int replica);

  uint64_t root_hash_;
  int chunk_tokens_;
  int max_chunks_;
  std::vector<ReplicaLru> lru_;                            // (num_replicas,)
  std::unordered_map<uint64_t, std::vector<int>> owners_;  // hash -> replicas holding it
};

}  // namespace rose
