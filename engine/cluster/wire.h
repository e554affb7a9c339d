#pragma once
// A flat byte buffer for the messages between MPI ranks (ranks.h): the cluster's calls on a
// remote replica and their results. Every rank runs the same binary, so fixed-size structs travel
// as their bytes; vectors and strings as a uint64 count, then the elements. A short or malformed
// buffer is rose::Error, never an out-of-bounds read.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/cluster/replica_handle.h"
#include "engine/scheduler/engine_config.h"
#include "engine/scheduler/request.h"

namespace rose {

class WireWriter {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&value, sizeof(T));
  }
  template <typename T>
  void put_vector(std::span<const T> values) {
    static_assert(std::is_trivially_copyable_v<T>);
    put(uint64_t(values.size()));
    append(values.data(), values.size_bytes());
  }
  void put_string(const std::string& s);
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  // Resize and copy (GCC 12 misreads a vector insert of a few bytes as an overflow).
  void append(const void* data, size_t n) {
    if (n == 0) return;
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, data, n);
  }

 private:
  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  explicit WireReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  template <typename T>
  std::vector<T> get_vector() {
    static_assert(std::is_trivially_copyable_v<T>);
    const uint64_t n = count(sizeof(T));
    std::vector<T> values(n);
    if (n > 0) std::memcpy(values.data(), take(n * sizeof(T)), n * sizeof(T));
    return values;
  }
  std::string get_string();
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  const uint8_t* take(size_t n);
  uint64_t count(size_t element_size);  // a count whose elements fit in what is left
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

void put_engine_config(WireWriter& w, const EngineConfig& c);
EngineConfig get_engine_config(WireReader& r);
void put_request(WireWriter& w, const EngineRequest& q);
EngineRequest get_request(WireReader& r);
void put_result(WireWriter& w, const RequestResult& q);
RequestResult get_result(WireReader& r);
// Appends to `into` (result numbers moved past its results).
void put_events(WireWriter& w, const ReplicaEvents& q);
void get_events(WireReader& r, ReplicaEvents& into);
// RunResult without per_replica and routing (a replica's own result).
void put_run_result(WireWriter& w, const RunResult& q);
RunResult get_run_result(WireReader& r);

}  // namespace rose
