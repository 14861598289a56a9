#pragma once
// Token-budget micro-batches: the trajectories of a global batch are packed first-fit-decreasing
// into micro-batches of at most `max_tokens_per_microbatch` tokens, and the micro-batches are
// dealt to the data-parallel shards so that every shard runs the same number of micro-batches
// (each step's collectives line up) with the tokens per shard as even as the packing allows.

#include <cstdint>
#include <vector>

#include "learner/result.hpp"

namespace caf_agent::learner {

/// Packing limits.
struct packing_options {
  /// Token budget of one micro-batch (one packed forward/backward). Must be > 0.
  int64_t max_tokens_per_microbatch = 0;
  /// Data-parallel shards the micro-batches are dealt to. Must be >= 1.
  int64_t shards = 1;
};

/// One micro-batch: which trajectories it holds (indices into the input lengths, longest first)
/// and their total tokens. An empty micro-batch has no trajectories and 0 tokens.
struct micro_batch {
  std::vector<int64_t> sequences;
  int64_t tokens = 0;
};

/// The plan of one step: shards[s] is the list of micro-batches shard s runs, in order. Every
/// shard has the same number of micro-batches.
struct packing_plan {
  std::vector<std::vector<micro_batch>> shards;
  int64_t microbatches_per_shard = 0;  ///< The common count.
  int64_t split_microbatches = 0;      ///< Micro-batches split in two to make the counts match.
  int64_t empty_microbatches = 0;      ///< Empty micro-batches added where no split was possible.
};

/// Packs `lengths` (tokens per trajectory) into a plan.
///
/// 1. First-fit decreasing: trajectories by length, longest first (ties by index), each into the
///    first micro-batch with room, else a new one.
/// 2. Equal counts: while the number of micro-batches is not a multiple of `shards`, the
///    micro-batch with the most tokens among those holding two or more trajectories is split in
///    two (first-fit decreasing into two halves of its size); when none can be split, empty
///    micro-batches are added. A shard's empty micro-batch runs no forward but still takes part
///    in the step, so the shards stay in lock step.
/// 3. Dealing: micro-batches by tokens, largest first, each to the shard with the fewest tokens
///    among those with fewer than the common count (ties: the lower shard index).
///
/// Errors: a trajectory longer than the budget (named by index and length: the caller must
/// drop or truncate it; it cannot be trained in one micro-batch), a zero or negative length,
/// a non-positive budget or shard count. No trajectories gives `shards` empty lists.
result<packing_plan> pack_microbatches(const std::vector<int64_t>& lengths, const packing_options& options);

}  // namespace caf_agent::learner
