#pragma once
// The training objectives as pure functions of per-token tensors: the PPO clipped surrogate with
// clip-higher, the value loss, the value-pretraining objective, rejection fine-tuning's NLL, the
// KL to a reference policy and the entropy. Each returns a scalar loss that carries the autograd
// graph of its differentiable input, plus the step statistics the trainer reports.
//
// Every input is a packed batch (see aggregation.hpp): per-token tensors [t] of one dtype-agnostic
// float type (computed in fp32), `loss_mask_t` 1 on sampled tokens, `seq_offsets_n1` on the CPU.
// Tokens with mask 0 never reach a loss or a statistic. An all-masked batch is an error value
// (the caller records a skipped step); a trajectory without a sampled token is left out.
//
// Shape legend: t tokens of the packed batch, n1 = trajectories + 1 offsets.

#include <cstdint>
#include <optional>

#include <torch/types.h>

#include "learner/aggregation.hpp"
#include "learner/result.hpp"

namespace caf_agent::learner {

/// A band [low, high] of the sampler-to-trainer importance ratio; tokens outside it are masked.
struct ratio_band {
  double low = 0.5;   ///< Rationale: a default for the option only; tokens the trainer finds
  double high = 2.0;  ///< 2x less or more likely than the sampler did are off-policy noise.
};

/// Options of the PPO clipped surrogate.
struct ppo_options {
  /// eps_low: the ratio is clipped below at 1 - clip_low. Rationale: the paper's 0.2.
  double clip_low = 0.2;
  /// eps_high: the ratio is clipped above at 1 + clip_high (clip-higher: more room for raising
  /// the probability of a good low-probability token). Rationale: the paper's 0.28.
  double clip_high = 0.28;
  /// How the per-token losses become one scalar (default: the paper's 1/T then mean).
  aggregation agg{};
  /// Truncated importance sampling: when set, each token's loss is weighted by
  /// min(exp(old_logp - sampler_logp), cap), correcting for the sampler/trainer mismatch.
  /// Requires ppo_batch::sampler_logp_t. Rationale: 2.0 is the cap the issue names.
  std::optional<double> truncated_is_cap;
  /// When set, tokens whose sampler-to-trainer ratio exp(old_logp - sampler_logp) leaves the band
  /// are dropped from the loss (and counted). Requires ppo_batch::sampler_logp_t.
  std::optional<ratio_band> mask_ratio_band;
};

/// The per-token inputs of the PPO loss.
struct ppo_batch {
  torch::Tensor logp_t;          ///< log pi_theta(a_t) of the current weights (carries grad).
  torch::Tensor old_logp_t;      ///< log pi_old(a_t), recomputed by the trainer before the update.
  torch::Tensor advantages_t;    ///< A_t (GAE); zero on unmasked tokens.
  torch::Tensor loss_mask_t;     ///< 1 on sampled tokens.
  torch::Tensor seq_offsets_n1;  ///< Packed layout.
  torch::Tensor sampler_logp_t;  ///< Optional: the sampler's log-probabilities (for TIS / band).
};

/// Loss and statistics of one PPO micro-batch. Means are over the sampled tokens that stayed in
/// the loss (after band masking); ratio r = exp(logp - old_logp).
struct ppo_result {
  torch::Tensor loss;             ///< Scalar fp32 with grad: agg of -min(r A, clip(r) A) [* w].
  int64_t tokens = 0;             ///< Sampled tokens in the loss.
  int64_t band_masked = 0;        ///< Sampled tokens dropped by mask_ratio_band.
  int64_t empty_sequences = 0;    ///< Trajectories left out for having no token in the loss.
  double clip_fraction = 0;       ///< Share of tokens whose clipped term won (gradient zero).
  double clip_fraction_low = 0;   ///< ... because r < 1 - clip_low with A < 0.
  double clip_fraction_high = 0;  ///< ... because r > 1 + clip_high with A > 0.
  double ratio_mean = 0;          ///< Mean r.
  double ratio_max = 0;           ///< Max r.
  double ratio_min = 0;           ///< Min r.
  double approx_kl_k1 = 0;        ///< Mean of old_logp - logp (k1 estimate of KL(old || new)).
  double approx_kl_k3 = 0;        ///< Mean of (r - 1) - log r (k3: unbiased, never negative).
  double is_weight_mean = 1;      ///< Mean TIS weight (1 without TIS).
  int64_t is_truncated = 0;       ///< Tokens whose TIS weight hit the cap.
};

/// The token-level PPO clipped surrogate with clip-higher:
///   L_t = -min(r_t A_t, clip(r_t, 1 - clip_low, 1 + clip_high) A_t),
/// aggregated by options.agg. Errors: shape or offset mismatch, an all-masked batch, a TIS or
/// band option without sampler_logp_t, clip values outside (0, 1] / (0, inf).
result<ppo_result> ppo_policy_loss(const ppo_batch& batch, const ppo_options& options);

/// Options of the value loss.
struct value_loss_options {
  /// When set, the clipped form: 0.5 max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2).
  std::optional<double> clip;
  /// How the per-token losses become one scalar.
  aggregation agg{};
};

/// Loss and statistics of the critic.
struct value_loss_result {
  torch::Tensor loss;        ///< Scalar fp32 with grad.
  int64_t tokens = 0;        ///< Sampled tokens in the loss.
  double clip_fraction = 0;  ///< Share of tokens where the clipped term was the larger one.
  double value_mean = 0;     ///< Mean V over the tokens.
  double return_mean = 0;    ///< Mean R over the tokens.
  double mse = 0;            ///< Unclipped token-mean of (V - R)^2 (no 0.5 factor).
};

/// The critic's MSE against the returns, with the 0.5 factor: L_t = 0.5 (V_t - R_t)^2 (so its
/// gradient is V - R), optionally clipped around `old_values_t` (may be undefined without clip).
/// Errors as ppo_policy_loss.
result<value_loss_result> value_loss(const torch::Tensor& values_t, const torch::Tensor& old_values_t,
                                     const torch::Tensor& returns_t, const torch::Tensor& loss_mask_t,
                                     const torch::Tensor& seq_offsets_n1, const value_loss_options& options);

/// Options of value pretraining.
struct value_pretrain_options {
  double gamma = 1.0;    ///< Rationale: the paper's gamma (episodic, no discount).
  double lambda = 0.95;  ///< Rationale: the paper's lambda.
  aggregation agg{};     ///< How the per-token losses become one scalar.
};

/// The value-pretraining objective L_VP of the CUDA Agent paper: the critic regresses on the
/// targets V_old + A_GAE, where V_old are its own (detached) predictions on the frozen actor's
/// trajectories and A_GAE their GAE (gamma, lambda, reward on the last sampled token):
///   L_VP = agg over sampled tokens of 0.5 (V_t - (V_old,t + A_t))^2.
/// `rewards_n` holds one scalar reward per trajectory (fp32/fp64, n entries). The targets are
/// computed from `values_t.detach()`, so one forward gives both. Errors as value_loss, plus a
/// trajectory without a sampled token (its reward has no action to sit on).
result<value_loss_result> value_pretrain_loss(const torch::Tensor& values_t, const torch::Tensor& rewards_n,
                                              const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1,
                                              const value_pretrain_options& options);

/// Loss and statistics of rejection fine-tuning.
struct nll_result {
  torch::Tensor loss;         ///< Scalar fp32 with grad: agg of -logp over sampled tokens.
  int64_t tokens = 0;         ///< Sampled tokens in the loss.
  double nll_token_mean = 0;  ///< Token-mean NLL (independent of the aggregation, for reports).
};

/// Rejection fine-tuning: the masked negative log-likelihood of the sampled tokens (prompt and
/// tool output are context, not targets). Errors as ppo_policy_loss.
result<nll_result> rft_nll(const torch::Tensor& logp_t, const torch::Tensor& loss_mask_t,
                           const torch::Tensor& seq_offsets_n1, const aggregation& agg = {});

/// Which per-token estimator of KL(pi_theta || pi_ref) on tokens sampled from pi_theta.
enum class kl_estimator {
  /// k1 = logp - ref_logp: unbiased, high variance, can be negative per token.
  k1,
  /// k3 = exp(ref_logp - logp) - 1 - (ref_logp - logp): unbiased, never negative, low variance
  /// (Schulman, "Approximating KL divergence", 2020). The gradient of its mean is biased; it is
  /// the usual choice as a loss term (GRPO's "low_var_kl").
  k3,
};

/// The KL penalty to a reference policy: agg over sampled tokens of the estimator. Differentiable
/// in `logp_t`; `ref_logp_t` is treated as a constant. Errors as ppo_policy_loss.
result<torch::Tensor> kl_to_reference(const torch::Tensor& logp_t, const torch::Tensor& ref_logp_t,
                                      const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1,
                                      kl_estimator estimator, const aggregation& agg = {});

/// The mean entropy over sampled tokens (`entropy_t` per token, from the chunked forward),
/// aggregated by `agg`; differentiable (a bonus term subtracts it). Errors as ppo_policy_loss.
result<torch::Tensor> entropy_mean(const torch::Tensor& entropy_t, const torch::Tensor& loss_mask_t,
                                   const torch::Tensor& seq_offsets_n1, const aggregation& agg = {});

}  // namespace caf_agent::learner
