#pragma once
/// tests/learner/tiny_decoder.hpp: tiny random decoders in memory for the learner's tests.

#include <torch/types.h>
#include <torch/utils.h>

#include <stdexcept>

#include <string>

#include "policy/model/decoder.hpp"

namespace caf_agent::learner::test_support {

/// A Qwen2-shaped config (q/k/v bias, tied embeddings) or, with `qwen3`, q/k norm, untied head
/// and head_dim 16 != hidden / heads.
inline policy::model_config tiny_config(int64_t vocab, int64_t layers, bool qwen3 = false) {
  policy::model_config c;
  c.family = qwen3 ? policy::model_family::qwen3 : policy::model_family::qwen2;
  c.vocab_size = vocab;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = qwen3 ? 16 : 8;
  c.max_position_embeddings = 64;
  c.attention_bias = !qwen3;
  c.qk_norm = qwen3;
  c.tie_word_embeddings = !qwen3;
  return c;
}

/// Random fp32 weights (std `scale`, norms near 1) with a random value head; every parameter
/// requires grad. Rationale: std 0.3 gives peaked, input-dependent distributions, so a packing
/// or masking bug changes the numbers visibly; 0.02 gives a near-uniform start for learning.
inline policy::decoder tiny_decoder(const policy::model_config& c, uint64_t seed, double scale = 0.3) {
  torch::manual_seed(seed);
  policy::tensor_map tensors;
  for (const auto& [key, shape] : policy::expected_parameter_shapes(c))
    tensors[key] = key.find("norm") != std::string::npos ? 1 + 0.1 * torch::randn(shape) : scale * torch::randn(shape);
  tensors["value_head.weight"] = scale * torch::randn({1, c.hidden_size});
  tensors["value_head.bias"] = torch::zeros({1});
  auto model =
      policy::decoder::from_tensors(c, tensors, torch::kCPU, torch::kFloat32, policy::value_head_mode::required);
  if (!model) throw std::runtime_error(model.error().message);
  for (const auto& [name, p] : model.value().named_parameters()) p.requires_grad_(true);
  return model.value();
}

}  // namespace caf_agent::learner::test_support
