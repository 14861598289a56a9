#pragma once
/// tests/policy/model/random_checkpoint.hpp: a tiny random Qwen2-shaped checkpoint for the
/// engine and serving tests (made in C++, no Python needed).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "policy/model/decoder.hpp"

namespace caf_agent::policy::test_support {

/// 2 layers, hidden 32, 4 query / 2 key-value heads of 8, attention bias, tied embeddings.
inline model_config tiny_qwen2_config(int64_t vocab_size, int64_t max_positions) {
  model_config c;
  c.family = model_family::qwen2;
  c.vocab_size = vocab_size;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = max_positions;
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  return c;
}

/// Random weights for `c` saved to `dir` (replaced). Rationale: std 0.3 weights give peaked,
/// seed-dependent distributions, so greedy and sampled runs differ and two seeds give
/// visibly different models.
inline std::string write_random_checkpoint(const model_config& c, const std::filesystem::path& dir, uint64_t seed) {
  std::filesystem::remove_all(dir);
  torch::manual_seed(seed);
  tensor_map tensors;
  for (const auto& [key, shape] : expected_parameter_shapes(c))
    tensors[key] = key.find("norm") != std::string::npos ? 1 + 0.1 * torch::randn(shape) : 0.3 * torch::randn(shape);
  auto model = decoder::from_tensors(c, tensors, torch::kCPU, torch::kFloat32);
  EXPECT_TRUE(model) << model.error().message;
  EXPECT_TRUE(model.value().save(dir.string()));
  return dir.string();
}

}  // namespace caf_agent::policy::test_support
