#pragma once
// Masked reductions over packed trajectories: the two loss aggregations, the segment layout of a
// packed batch, and the finiteness check every step runs before it applies an update.
//
// A packed batch is the tokens of n trajectories laid end to end (no padding); `seq_offsets_n1`
// (int64, n + 1 entries, on the CPU, starting at 0, non-decreasing) holds the cumulative lengths,
// so trajectory i is tokens [seq_offsets[i], seq_offsets[i + 1]). One trajectory is {0, T}.
// `loss_mask_t` is 1 on sampled tokens (the actions) and 0 on prompt and tool-output tokens.
//
// Shape legend: t tokens of the packed batch, n trajectories, n1 = n + 1 offsets.

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "learner/result.hpp"

namespace caf_agent::learner {

/// How a per-token loss becomes one scalar.
enum class aggregation_mode {
  /// The paper's form: 1/T_i times the sum over the sampled tokens of trajectory i (T_i their
  /// count), then the mean over trajectories. Every trajectory weighs the same, however long.
  seq_mean_token_mean,
  /// The sum over all sampled tokens of the batch divided by their count: long trajectories
  /// weigh in proportion to their length.
  token_mean,
};

/// The aggregation of a loss and its normaliser.
struct aggregation {
  /// Which of the two forms.
  aggregation_mode mode = aggregation_mode::seq_mean_token_mean;
  /// 0: divide by this batch's own count (non-empty trajectories, or sampled tokens). > 0:
  /// divide by this count instead, the count of the whole global batch (see
  /// aggregation_count), so that the losses of its micro-batches and shards add up to the
  /// loss of the whole batch and gradient accumulation plus an all-reduce sum reproduces it.
  double denominator = 0;
};

/// Offsets {0, length} of a batch holding one trajectory.
torch::Tensor single_sequence_offsets(int64_t length);

/// Checks a packed batch's layout: offsets are int64 [n + 1] from 0, non-decreasing, ending at
/// `tokens`. `what` names the caller in the error.
status check_offsets(const torch::Tensor& seq_offsets_n1, int64_t tokens, const char* what);

/// The trajectory index of every token (int64 [t], on `device`).
torch::Tensor segment_ids(const torch::Tensor& seq_offsets_n1, torch::Device device);

/// The count `mode` divides by: trajectories with at least one sampled token, or sampled tokens.
/// Sum it over micro-batches and shards to get aggregation::denominator of the global batch.
double aggregation_count(const torch::Tensor& loss_mask_t, const torch::Tensor& seq_offsets_n1, aggregation_mode mode);

/// The aggregated masked mean of `values_t` (any float dtype; computed in fp32, differentiable).
/// Trajectories without a sampled token contribute nothing and are not counted. An error when
/// the batch has no sampled token at all (nothing to learn from: the caller skips the step), or
/// when shapes or offsets disagree.
result<torch::Tensor> masked_aggregate(const torch::Tensor& values_t, const torch::Tensor& loss_mask_t,
                                       const torch::Tensor& seq_offsets_n1, const aggregation& agg);

/// True when every element of every defined tensor is finite (no NaN, no +-Inf). One device
/// sync for the whole list; undefined tensors are skipped.
bool all_finite(const std::vector<torch::Tensor>& tensors);

/// 1 - Var(returns - values) / Var(returns) over the masked tokens (population variances).
/// 1 is a perfect critic, 0 one that predicts the mean, negative worse than that. An error when
/// fewer than two tokens are masked or the returns have zero variance (undefined).
result<double> explained_variance(const torch::Tensor& values_t, const torch::Tensor& returns_t,
                                  const torch::Tensor& mask_t);

}  // namespace caf_agent::learner
