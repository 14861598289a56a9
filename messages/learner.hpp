#pragma once
/// messages/learner.hpp: training steps on the learner shards and weight publication.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Trainer -> every learner shard: one step over the global batch (each shard trains its share
/// of the packing plan). The batch is the records as stored: token ids, loss mask, sampler
/// log-probabilities, one reward per trajectory; never re-tokenised.
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
  int32_t sequences_per_step = 0;  ///< trajectories per optimizer step, round robin; 0: the whole batch
  int64_t sequence_cursor = 0;  ///< the round robin's first trajectory (the stage's steps so far x sequences_per_step)
  double temperature = 0;       ///< the episodes' sampling temperature (log-probabilities under it); 0: the shard's
  CAF_AGENT_FIELDS(train_batch, batch_id, attempt, stage, base_version, base_checkpoint, new_version, generation,
                   stage_in_process, episode_ids, tokens, seq_offsets, loss_mask, sampler_logp, rewards, actor_lrs,
                   sequences_per_step, sequence_cursor, temperature)
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
