#pragma once
// train_forward: the learner's forward pass with autograd over a packed batch (see
// aggregation.hpp): the tokens of n sequences end to end in one row, no padding, positions
// restarting at 0 per sequence, attention never crossing a sequence (decoder::packed_block).
//
// Per token it returns what the losses need, aligned to the token itself: the log-probability
// of token i given the tokens before it in its sequence, the entropy of that next-token
// distribution, and the critic's value of the state before token i (the hidden state at i - 1).
// The first token of every sequence has no predecessor: its entries are 0 (it is always prompt,
// so loss masks are 0 there).
//
// Memory: the LM head runs in chunks of `logprob_chunk` positions under recomputation, so at
// most one [chunk, v] logits tensor exists at a time, in the forward and in the backward;
// `checkpoint_layers` keeps only each block's input and recomputes the block in the backward.
//
// Shape legend: t tokens of the packed batch, n1 = sequences + 1 offsets, d hidden, v vocab.

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "learner/result.hpp"
#include "policy/model/decoder.hpp"

namespace caf_agent::learner {

/// Options of the training forward.
struct train_forward_options {
  /// Compute dtype: kFloat32, or kBFloat16 over fp32 master weights (differentiable casts, so
  /// gradients land in fp32 on the master parameters).
  torch::ScalarType compute_dtype = torch::kFloat32;
  /// Recompute each block in the backward instead of keeping its activations.
  bool checkpoint_layers = false;
  /// Positions per LM-head chunk; 0 computes the whole [t, v] logits at once (tests only).
  /// Rationale: 1024 x 151,936 fp32 logits are 0.6 GB, small next to an H200 and large enough
  /// for full-speed matrix multiplies.
  int64_t logprob_chunk = 1024;
  /// Recompute each chunk's logits in the backward (memory: one chunk's logits at a time). Off,
  /// autograd keeps every chunk's [chunk, v] intermediates (a few [t, v] fp32 tensors: fine
  /// for 8k tokens on an H200, not for 131k) and the backward skips one LM-head matmul.
  bool recompute_head = true;
  /// On CUDA in bf16, the LM head's softmax statistics by the fused kernels (fused_head.hpp)
  /// instead of the ATen composite over fp32 [chunk, v] tensors; false for parity checks.
  bool fused_head = true;
  /// Softmax temperature of the policy whose log-probabilities are computed (the sampler's).
  double temperature = 1.0;
  /// Compute log-probabilities and entropy (the actor); false skips the LM head.
  bool want_logprobs = true;
  /// Compute the entropy too (a little more work per chunk).
  bool want_entropy = true;
  /// Compute the critic's values (requires a value head).
  bool want_values = false;
};

/// Per-token outputs, each fp32 [t], aligned to the token (0 at every sequence's first token).
struct train_forward_output {
  torch::Tensor logp_t;     ///< log pi(token_i | tokens before i in its sequence).
  torch::Tensor entropy_t;  ///< Entropy of the next-token distribution before token i.
  torch::Tensor values_t;   ///< Critic value of the state before token i.
};

/// The packed training forward of `model` over `tokens_t` (int64 [t], on the model's device)
/// with `seq_offsets_n1` (int64 [n + 1] on the CPU). Errors: bad offsets, a sequence longer than
/// the model's max_position_embeddings, token ids outside the vocabulary, values without a value
/// head, an unsupported compute dtype.
result<train_forward_output> train_forward(const policy::decoder& model, const torch::Tensor& tokens_t,
                                           const torch::Tensor& seq_offsets_n1, const train_forward_options& options);

/// A function of tensors recomputed in the backward (activation checkpointing).
using recompute_fn = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>;

/// Runs `fn(inputs)` without keeping its intermediate activations: the forward runs under
/// no-grad, and the backward runs `fn` again on the saved inputs with grad enabled and
/// differentiates that. `fn` must be deterministic and use only `inputs` as differentiable
/// tensors (anything else it captures is a constant). Outputs must be fresh tensors of a float
/// dtype. The returned tensors carry one autograd node linking them to `inputs`.
std::vector<torch::Tensor> checkpointed(recompute_fn fn, const std::vector<torch::Tensor>& inputs);

/// Position of every token within its sequence (int64 [t] on `device`): 0, 1, ... restarting at
/// each offset.
torch::Tensor packed_positions(const std::vector<int64_t>& seq_offsets, torch::Device device);

}  // namespace caf_agent::learner
