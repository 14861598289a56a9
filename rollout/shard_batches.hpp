#pragma once
/// @file shard_batches.hpp
/// The trainer's slices of an iteration's batch: one train_batch per learner shard, holding only
/// the trajectories that shard's micro-batches use and the plan of every optimizer step
/// (learner/batch_plan), flattened as messages/learner.hpp says; and the plan read back.
///
/// Rationale: at the paper's 1024 trajectories of up to 131k tokens the whole batch is about
/// 1.7 GB, past BASP's message limit for any one shard and 128x the traffic on 128 shards; a
/// slice is about 1 / shards of it.

#include <cstdint>
#include <vector>

#include "learner/batch_plan.hpp"
#include "learner/result.hpp"
#include "messages/learner.hpp"

namespace caf_agent::rollout {

/// How the shards step through the batch.
struct slice_options {
  int64_t sequences_per_step = 0;         ///< trajectories per optimizer step, round robin; 0: all
  int64_t sequence_cursor = 0;            ///< the round robin's first trajectory
  int64_t max_tokens_per_microbatch = 0;  ///< the shards' learner.max_tokens_per_microbatch
  int32_t shards = 1;                     ///< learner.shards
};

/// Each shard's train_batch (index: rank) of `whole`, the iteration's batch with every
/// trajectory (its header fields are copied; one optimizer step per actor_lrs entry, or one).
/// Errors: fields of different lengths (tokens, loss mask and sampler log-probabilities; the
/// offsets, rewards and episode ids per trajectory), and plan_batch's.
learner::result<std::vector<messages::train_batch>> shard_batches(const messages::train_batch& whole,
                                                                  const slice_options& options);

/// The plan of a shard's train_batch, one step_plan per optimizer step. Errors: flattened fields
/// that do not add up (counts, totals per step, an index outside the message's trajectories).
learner::result<std::vector<learner::step_plan>> plan_of(const messages::train_batch& b);

}  // namespace caf_agent::rollout
