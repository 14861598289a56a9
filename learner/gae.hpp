#pragma once
// Generalized advantage estimation over multi-turn agent trajectories.
//
// Only sampled tokens (loss mask 1) are steps of the chain; prompt and tool-output tokens are
// skipped, so the successor of a turn's last sampled token is the next turn's first sampled token.
// With k = 0..K-1 indexing the sampled tokens of one trajectory in order:
//   delta_k = r_k + gamma V_{k+1} - V_k,   V_K = 0 (the episode ends after the last action),
//   A_k     = delta_k + gamma lambda A_{k+1},  A_K = 0,
//   R_k     = A_k + V_k (the return, the critic's target),
// where r_k = 0 except on the last sampled token, which carries the trajectory's scalar reward.
// `values_t[t]` is V of the state in which token t is chosen (the prefix before t); the model side
// reads it off the hidden state at t - 1. Computed on the CPU in fp64 (the chain is sequential;
// 131,072 steps take well under a millisecond), returned in fp32 on the values' device.
//
// Shape legend: t tokens (of one trajectory or a packed batch), n trajectories, n1 = n + 1.

#include <torch/types.h>

#include "learner/result.hpp"

namespace caf_agent::learner {

/// Discount and GAE parameters.
struct gae_options {
  double gamma = 1.0;    ///< Rationale: the paper's gamma (episodic reward, no discount).
  double lambda = 0.95;  ///< Rationale: the paper's lambda.
};

/// Advantages and returns per token; both zero on unmasked tokens.
struct gae_result {
  torch::Tensor advantages_t;  ///< A_k at the sampled tokens, fp32.
  torch::Tensor returns_t;     ///< R_k = A_k + V_k at the sampled tokens, fp32.
};

/// GAE of one trajectory with its scalar `reward`. Errors: shapes differ, no sampled token (the
/// reward has no action to sit on), non-finite values or reward, gamma or lambda outside [0, 1].
result<gae_result> gae(const torch::Tensor& values_t, double reward, const torch::Tensor& loss_mask_t,
                       const gae_options& options = {});

/// GAE of every trajectory of a packed batch; `rewards_n` holds one reward per trajectory.
/// The chains never cross trajectories. Errors as gae, naming the trajectory.
result<gae_result> gae_packed(const torch::Tensor& values_t, const torch::Tensor& rewards_n,
                              const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1,
                              const gae_options& options = {});

}  // namespace caf_agent::learner
