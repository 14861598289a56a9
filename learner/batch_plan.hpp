#pragma once
// batch_plan: which trajectories each data-parallel shard trains in each optimizer step of an
// iteration, computed once by whoever holds the whole batch (the trainer), so that each shard
// gets only the trajectories its micro-batches use and runs the plan as given. Pure: lengths,
// sampled-token counts and rewards in, indices out; no LibTorch, so the trainer's actor (which
// has no LibTorch) and the learner share one planner.
//
// A step's selection: with `sequences_per_step` p < n, step i trains the trajectories
// (sequence_cursor + i * p + k) % n for k < p (the round robin over the batch); otherwise the
// whole batch in order. Its micro-batches: plan_microbatches over the selection's lengths.

#include <cstdint>
#include <string>
#include <vector>

#include "learner/packing.hpp"
#include "learner/result.hpp"

namespace caf_agent::learner {

/// The micro-batches of one step on `shards` shards (indices into `lengths`). A budget of 0 on
/// one shard is the whole step as one micro-batch, in input order; a budget of 0 on several is
/// about 1 / shards of the tokens, never less than the longest trajectory. Else
/// pack_microbatches under the budget (its errors: a trajectory longer than the budget, ...).
result<packing_plan> plan_microbatches(const std::vector<int64_t>& lengths, int64_t max_tokens_per_microbatch,
                                       int64_t shards);

/// How the iteration's optimizer steps pick their trajectories and micro-batches.
struct batch_plan_options {
  int64_t steps = 1;                      ///< optimizer steps on the batch (>= 1)
  int64_t sequences_per_step = 0;         ///< trajectories per step, round robin; 0 (or >= n): all
  int64_t sequence_cursor = 0;            ///< the round robin's first trajectory (>= 0)
  int64_t max_tokens_per_microbatch = 0;  ///< the shards' learner.max_tokens_per_microbatch (>= 0)
  int64_t shards = 1;                     ///< data-parallel shards (>= 1)
};

/// One optimizer step as one shard runs it.
struct step_plan {
  /// This shard's non-empty micro-batches in order, each the indices (into the shard's
  /// trajectories, shard_slice::sequences) of its trajectories in packing order.
  std::vector<std::vector<int64_t>> microbatches;
  int64_t sequences = 0;       ///< trajectories of the step on all shards
  int64_t tokens = 0;          ///< their tokens
  int64_t sampled_tokens = 0;  ///< their tokens with loss mask 1
  double reward_sum = 0;       ///< the sum of their rewards
  /// Non-empty: the step cannot be planned (the packing's error); every shard skips it.
  std::string skip_reason;
};

/// What one shard gets of the batch.
struct shard_slice {
  std::vector<int64_t> sequences;  ///< the batch's trajectories it holds, ascending
  std::vector<step_plan> steps;    ///< one per optimizer step
};

/// The slices of every shard (`shards` of them): every trajectory of every step goes to exactly
/// one shard, as plan_microbatches deals it. `sampled_tokens` and `rewards` (one per
/// trajectory, like `lengths`) only feed each step's totals. Errors: inputs of different
/// sizes, steps < 1, shards < 1, a negative budget, cursor or sequences_per_step.
result<std::vector<shard_slice>> plan_batch(const std::vector<int64_t>& lengths,
                                            const std::vector<int64_t>& sampled_tokens,
                                            const std::vector<double>& rewards, const batch_plan_options& options);

}  // namespace caf_agent::learner
