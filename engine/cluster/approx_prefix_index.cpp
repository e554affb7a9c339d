#include "engine/cluster/approx_prefix_index.h"

#include <xxhash.h>

#include <algorithm>

#include "engine/common/error.h"

namespace rose {

ApproxPrefixIndex::ApproxPrefixIndex(std::string_view model_id, int chunk_tokens, int max_chunks,
                                     std::vector<int64_t> capacity_chunks)
    : root_hash_(XXH64(model_id.data(), model_id.size(), 0)),
      chunk_tokens_(chunk_tokens),
      max_chunks_(max_chunks),
      lru_(capacity_chunks.size()) {
  if (chunk_tokens < 1) fail("router chunk size must be at least 1 token, got {}", chunk_tokens);
  if (max_chunks < 1) fail("router max chunks must be at least 1, got {}", max_chunks);
  ROSE_ASSERT(!capacity_chunks.empty());
  for (size_t r = 0; r < lru_.size(); ++r)
    lru_[r].capacity = std::max<int64_t>(1, capacity_chunks[r]);
}

std::vector<uint64_t> ApproxPrefixIndex::chunk_hashes(std::span<const int32_t> prompt) const {
  const size_t count = std::min(prompt.size() / size_t(chunk_tokens_), size_t(max_chunks_));
  std::vector<uint64_t> hashes(count);
  uint64_t parent = root_hash_;
  for (size_t i = 0; i < count; ++i) {
    parent = XXH64(prompt.data() + i * size_t(chunk_tokens_),
                   size_t(chunk_tokens_) * sizeof(int32_t), parent);
    hashes[i] = parent;
  }
  return hashes;
}

void ApproxPrefixIndex::match(std::span<const uint64_t> hashes, std::vector<int>& matched) const {
  matched.assign(lru_.size(), 0);
  for (size_t i = 0; i < hashes.size(); ++i) {
    const auto it = owners_.find(hashes[i]);
    if (it == owners_.end()) return;
    bool advanced = false;
    for (int r : it->second) {
      if (matched[size_t(r)] == int(i)) {
        matched[size_t(r)] = int(i) + 1;
        advanced = true;
      }
    }
    if (!advanced) return;
  }
}

void ApproxPrefixIndex::record(std::span<const uint64_t> hashes, int replica) {
  ROSE_ASSERT(replica >= 0 && replica < num_replicas());
  ReplicaLru& lru = lru_[size_t(replica)];
  for (size_t i = hashes.size(); i-- > 0;) touch(lru, hashes[i], replica);
  while (int64_t(lru.where.size()) > lru.capacity) {
    const uint64_t victim = lru.order.back();
    lru.order.pop_back();
    lru.where.erase(victim);
    drop_owner(victim, replica);
  }
}

bool ApproxPrefixIndex::holds(int replica, uint64_t hash) const {
  return lru_[size_t(replica)].where.contains(hash);
}

void ApproxPrefixIndex::touch(ReplicaLru& lru, uint64_t hash, int replica) {
  const auto it = lru.where.find(hash);
  if (it != lru.where.end()) {
    lru.order.splice(lru.order.begin(), lru.order, it->second);
    return;
  }
  lru.order.push_front(hash);
  lru.where.emplace(hash, lru.order.begin());
  owners_[hash].push_back(replica);
}

void ApproxPrefixIndex::drop_owner(uint64_t hash, int replica) {
  const auto it = owners_.find(hash);
  ROSE_ASSERT(it != owners_.end());
  std::vector<int>& replicas = it->second;
  replicas.erase(std::find(replicas.begin(), replicas.end(), replica));
  if (replicas.empty()) owners_.erase(it);
}

}  // namespace rose
