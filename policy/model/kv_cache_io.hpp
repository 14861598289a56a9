#pragma once
// kv_cache_io: how decoder_cache.cpp and decoder_flash.cpp write and read a KV cache's entries
// (the model's dtype, or e4m3 bytes), and whether a sequence's blocks are one run. Internal to
// policy/model. Shape legend: see decoder.hpp.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "policy/model/decoder.hpp"

namespace caf_agent::policy::kv_io {

inline bool is_fp8(const torch::Tensor& cache) {
  return cache.scalar_type() == torch::kFloat8_e4m3fn;
}

// Keys or values of the model's dtype as `cache` holds them (kv_cache::entries()): for an e4m3 cache each
// value saturated at +-448 and rounded to e4m3 (ATen's cast alone turns what exceeds the range
// into NaN), as bytes; otherwise as they are.
inline torch::Tensor stored(const torch::Tensor& x, const torch::Tensor& cache) {
  if (!is_fp8(cache)) return x;
  return x.clamp(-448.0, 448.0).to(torch::kFloat8_e4m3fn).view(torch::kUInt8);
}

// Entries read from `cache` (its own type or kv_cache::entries()' bytes) in `dtype`.
inline torch::Tensor loaded(const torch::Tensor& x, const torch::Tensor& cache, torch::ScalarType dtype) {
  return is_fp8(cache) ? x.view(torch::kFloat8_e4m3fn).to(dtype) : x;
}

// Whether the blocks holding positions 0..end-1 (blocks of `block_size` tokens) are consecutive
// block ids, so that each KV head's keys lie in one stretch of the flat paged cache.
inline bool one_run(const std::vector<int64_t>& blocks, int64_t block_size, int64_t end) {
  const auto used = std::min(blocks.size(), static_cast<size_t>((end + block_size - 1) / block_size));
  for (size_t i = 1; i < used; ++i)
    if (blocks[i] != blocks[i - 1] + 1) return false;
  return true;
}

}  // namespace caf_agent::policy::kv_io
