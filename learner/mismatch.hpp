#pragma once
// Sampler/trainer mismatch, measured before every update: the sampler (inference engine, its
// kernels and precision) and the trainer (training forward) assign different probabilities to the
// same sampled tokens; the CUDA Agent paper traces its training collapse to that gap. The trainer
// recomputes the old log-probabilities and reports these statistics per step.
//
// Shape legend: t tokens of a packed batch.

#include <cstdint>
#include <optional>

#include <torch/types.h>

#include "learner/losses.hpp"
#include "learner/result.hpp"

namespace caf_agent::learner {

/// Statistics of logp_trainer - logp_sampler over the masked tokens. The importance ratio is
/// rho = exp(trainer_logp - sampler_logp) (what the trainer's policy thinks over what was used).
struct mismatch_result {
  int64_t tokens = 0;         ///< Masked tokens compared.
  double abs_delta_mean = 0;  ///< Mean |trainer_logp - sampler_logp|.
  double abs_delta_max = 0;   ///< Max |trainer_logp - sampler_logp|.
  double kl_k1 = 0;           ///< KL(sampler || trainer) k1 estimate: mean(sampler - trainer).
  double kl_k3 = 0;           ///< KL(sampler || trainer) k3 estimate: mean(rho - 1 - log rho).
  double ratio_mean = 0;      ///< Mean rho.
  double ratio_max = 0;       ///< Max rho.
  double ratio_min = 0;       ///< Min rho.
  int64_t outside_band = 0;   ///< Tokens with rho outside `band` (0 without a band).
};

/// Compares the two log-probabilities on the masked tokens (both [t], any float dtype, same
/// device). Tokens on which the sampler reports no log-probability must be masked out by the
/// caller. `band` counts tokens whose ratio leaves it. Errors: shapes differ, no masked token,
/// non-finite log-probabilities on masked tokens (named with the first such token).
result<mismatch_result> mismatch_stats(const torch::Tensor& sampler_logp_t, const torch::Tensor& trainer_logp_t,
                                       const torch::Tensor& mask_t, std::optional<ratio_band> band = {});

}  // namespace caf_agent::learner
