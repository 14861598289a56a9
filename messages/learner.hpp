#pragma once
/// messages/learner.hpp: training steps on the learner shards and weight publication.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Trainer -> each learner shard: its slice of one iteration's batch. The trainer plans every
/// optimizer step for all shards at once (learner/batch_plan: the round robin of
/// `batch_sequences` trajectories a step, the micro-batches dealt over the shards) and sends each
/// shard only the trajectories its micro-batches use, with its plan; the shard runs the plan as
/// given. The trajectories are the records as stored: token ids, loss mask, sampler
/// log-probabilities, one reward per trajectory; never re-tokenised.
///
/// The plan, flattened (rollout/shard_batches encodes and decodes it): optimizer step i has
/// step_microbatches[i] micro-batches; micro-batch j (counted over all steps) holds the next
/// microbatch_sizes[j] entries of plan_sequences, indices into this message's trajectories in
/// packing order. step_sequences, step_tokens, step_sampled_tokens, step_reward_sums and
/// step_skip_reasons (empty: planned) are step i's totals over every shard.
struct train_batch {
  uint64_t batch_id = 0;  ///< the iteration
  int32_t attempt = 0;    ///< 1, 2, ...: a retried step has the same batch and a new attempt
  learner_stage stage = learner_stage::ppo;
  uint64_t base_version = 0;      ///< the weights the step starts from
  std::string base_checkpoint;    ///< their checkpoint ("" for version 0: the base model)
  uint64_t new_version = 0;       ///< the version the step produces
  uint64_t generation = 0;        ///< process-group generation (bumped whenever the shard set changed)
  bool stage_in_process = false;  ///< rank 0 also stages the new actor tensors for an engine of its process
  std::vector<uint64_t> episode_ids;
  std::vector<int32_t> tokens;
  std::vector<int64_t> seq_offsets;
  std::vector<uint8_t> loss_mask;
  std::vector<float> sampler_logp;
  std::vector<float> rewards;
  /// The actor's learning rate of each optimizer step the iteration takes on this batch (an lr
  /// schedule's rates); empty: one step at the shard's learner.actor_lr.
  std::vector<double> actor_lrs;
  double temperature = 0;  ///< the episodes' sampling temperature (log-probabilities under it); 0: the shard's
  int32_t rank = 0;        ///< the shard the slice is for
  int32_t shards = 1;      ///< the shards the plan deals over
  /// The budget the plan was made with (learner.max_tokens_per_microbatch); a shard with
  /// another refuses the step.
  int64_t max_tokens_per_microbatch = 0;
  std::vector<int32_t> step_microbatches;
  std::vector<int32_t> microbatch_sizes;
  std::vector<int32_t> plan_sequences;
  std::vector<int64_t> step_sequences;
  std::vector<int64_t> step_tokens;
  std::vector<int64_t> step_sampled_tokens;
  std::vector<double> step_reward_sums;
  std::vector<std::string> step_skip_reasons;
  CAF_AGENT_FIELDS(train_batch, batch_id, attempt, stage, base_version, base_checkpoint, new_version, generation,
                   stage_in_process, episode_ids, tokens, seq_offsets, loss_mask, sampler_logp, rewards, actor_lrs,
                   temperature, rank, shards, max_tokens_per_microbatch, step_microbatches, microbatch_sizes,
                   plan_sequences, step_sequences, step_tokens, step_sampled_tokens, step_reward_sums,
                   step_skip_reasons)
};

/// Learner shard -> trainer: one shard's step is done (or failed: `error`).
struct train_step_done {
  uint64_t batch_id = 0;
  int32_t attempt = 0;
  int32_t rank = 0;
  std::string node_id;
  uint64_t policy_version = 0;  ///< the version the shard now holds
  bool applied = false;         ///< false: skipped (a non-finite loss, nothing sampled); see skip_reason
  std::string skip_reason;
  std::string error;       ///< the step failed (a peer died mid all-reduce, a bad checkpoint)
  double policy_loss = 0;  ///< this shard's share of the global sum
  double value_loss = 0;
  double explained_variance = 0;
  double entropy = 0;
  int64_t sampled_tokens = 0;
  std::string checkpoint;       ///< rank 0: the new version's checkpoint directory
  std::string in_process_path;  ///< rank 0 when asked: "inproc:<key>" for engines of its process
  std::string report_json;      ///< learner::step_report as JSON
  double prepare_s = 0;         ///< rendezvous and (re)loading
  double step_s = 0;
  double save_s = 0;
  double stage_s = 0;
  int32_t optimizer_steps = 0;  ///< steps taken on the batch (train_batch::actor_lrs, or 1)
  double nll = 0;               ///< rft: the mean over those steps of the sampled tokens' NLL
  CAF_AGENT_FIELDS(train_step_done, batch_id, attempt, rank, node_id, policy_version, applied, skip_reason, error,
                   policy_loss, value_loss, explained_variance, entropy, sampled_tokens, checkpoint, in_process_path,
                   report_json, prepare_s, step_s, save_s, stage_s, optimizer_steps, nll)
};

/// Learner / trainer / inspector -> policy services: new weights at `path` (a checkpoint
/// directory, or "inproc:<key>" for an engine in the trainer's process).
struct weights_published {
  uint64_t version = 0;
  std::string path;
  CAF_AGENT_FIELDS(weights_published, version, path)
};

}  // namespace caf_agent::messages
