#pragma once
// trainer: one training step of the actor and critic over a packed batch of trajectories, for
// the three stages of the CUDA Agent recipe:
//   ppo  the old log-probabilities and values are recomputed by the trainer (no grad), the
//        sampler/trainer mismatch is measured against the sampler's log-probabilities, GAE
//        gives advantages and returns, then `ppo_epochs` updates of the actor (PPO clipped
//        surrogate with clip-higher, optional entropy bonus) and the critic (value loss), each
//        over token-budget micro-batches with gradient accumulation;
//   rft  rejection fine-tuning: the masked NLL of the sampled tokens of (filtered) trajectories;
//   vp   value pretraining: the critic regresses on V_old + A_GAE (L_VP), the actor is frozen.
// A step with a non-finite loss or gradient changes no weight and reports why. In bf16 (or fp16)
// compute, each model's forward runs on its compute copy (flat_params.hpp): the masters cast in
// one kernel, the gradients added back in one.
//
// Shape legend: t tokens of the packed batch, n trajectories, n1 = n + 1 offsets.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "learner/batch_plan.hpp"
#include "learner/checkpoint.hpp"
#include "learner/flat_params.hpp"
#include "learner/gae.hpp"
#include "learner/losses.hpp"
#include "learner/mismatch.hpp"
#include "learner/optimizer.hpp"
#include "learner/result.hpp"
#include "learner/train_forward.hpp"
#include "policy/model/decoder.hpp"

namespace caf_agent::learner {

class process_group;

/// A packed batch of trajectories (see aggregation.hpp).
struct rollout_batch {
  torch::Tensor tokens_t;        ///< int64 [t]: every token of every trajectory, end to end.
  torch::Tensor seq_offsets_n1;  ///< int64 [n + 1] on the CPU.
  torch::Tensor loss_mask_t;     ///< float [t]: 1 on sampled tokens (the actions).
  torch::Tensor sampler_logp_t;  ///< float [t]: the sampler's log-probabilities (optional).
  torch::Tensor rewards_n;       ///< float [n]: one scalar reward per trajectory.

  /// Trajectories in the batch.
  int64_t sequences() const { return seq_offsets_n1.defined() ? seq_offsets_n1.numel() - 1 : 0; }
  /// Checks shapes, dtypes and offsets.
  status validate() const;
  /// The trajectories `indices` (in that order) as a batch of their own, on the CPU.
  rollout_batch select(const std::vector<int64_t>& indices) const;
};

/// The training stage of one step.
enum class train_stage { ppo, rft, value_pretrain };

/// Parses "ppo", "rft" or "vp".
result<train_stage> parse_stage(const std::string& name);

/// Options of the trainer.
struct trainer_options {
  train_forward_options forward;    ///< Compute dtype, recomputation, LM-head chunk, temperature.
  adamw_options actor_optimizer{};  ///< Actor AdamW (lr 3e-6 by default).
  adamw_options critic_optimizer{.lr = default_critic_lr};  ///< Critic AdamW (lr 6e-6).
  ppo_options ppo{};                                        ///< Clip-higher 0.2 / 0.28, aggregation, TIS, band masking.
  gae_options gae{};                                        ///< gamma 1, lambda 0.95.
  value_loss_options value{};                               ///< Critic loss (optional clipping).
  /// Updates per PPO step over the same batch (each one optimizer step of actor and critic).
  int64_t ppo_epochs = 1;
  /// Token budget of one micro-batch (first-fit-decreasing packing); 0: the whole batch.
  int64_t max_tokens_per_microbatch = 0;
  /// Whiten the advantages over the batch's sampled tokens (mean 0, std 1).
  bool normalize_advantages = false;
  /// Weight of the entropy bonus in the actor loss (0: none).
  double entropy_coef = 0.0;
  /// Data-parallel shards (not owned; null or a world of one: this process alone). Every shard
  /// trains its share of the step's packing plan (token-budget micro-batches dealt so every
  /// shard runs as many; batch_plan.hpp); the aggregation's denominator, the
  /// advantage whitening, the skip decision and the gradients (a sum) are all-reduced, so the
  /// shards take the step one process would take on the whole batch.
  process_group* group = nullptr;
};

/// What one step did and measured.
struct step_report {
  std::string stage;                        ///< "ppo", "rft" or "vp".
  bool applied = false;                     ///< False when the step was skipped (weights unchanged).
  std::string skip_reason;                  ///< Why it was skipped.
  int64_t sequences = 0;                    ///< Trajectories in the batch.
  int64_t tokens = 0;                       ///< Tokens in the batch.
  int64_t sampled_tokens = 0;               ///< Tokens with loss mask 1.
  int64_t microbatches = 0;                 ///< Micro-batches per update.
  double policy_loss = 0;                   ///< PPO surrogate (last epoch), or the RFT NLL loss.
  double value_loss = 0;                    ///< Critic loss (last epoch), or L_VP.
  double nll = 0;                           ///< Token-mean NLL of the sampled tokens (rft).
  double entropy = 0;                       ///< Token-mean entropy of the sampled tokens' distributions.
  double explained_variance = 0;            ///< Of the critic's values against the GAE returns (ppo, vp).
  double reward_mean = 0;                   ///< Mean trajectory reward.
  double advantage_mean = 0;                ///< Mean advantage over sampled tokens (before whitening).
  std::optional<ppo_result> ppo;            ///< PPO statistics of the last micro-batch (ppo).
  std::optional<mismatch_result> mismatch;  ///< Sampler vs trainer, before the update (ppo).
  optimizer_step_report actor_step;         ///< The actor's last optimizer step.
  optimizer_step_report critic_step;        ///< The critic's last optimizer step.
  double seconds = 0;                       ///< Wall time of the step.
  /// ppo: the old log-probabilities, values and advantages before the update (no grad); 0 else.
  double old_logprob_seconds = 0;
  double update_seconds = 0;  ///< The rest of the step: forward, backward, optimizer.
  double actor_lr = 0;        ///< The actor's learning rate of the step.

  /// One JSON object with every field (for logs and learner_tool).
  std::string to_json() const;
};

/// The actor, the critic, their optimizers and the step counter.
class trainer {
 public:
  /// A trainer over `actor` and, for ppo / vp, `critic` (a decoder with a value head). Both
  /// must hold fp32 master weights; they are trained in place.
  static result<trainer> create(policy::decoder actor, std::optional<policy::decoder> critic,
                                const trainer_options& options);

  /// One step of `stage` over `batch`, the global batch: plans it (plan_batch, one step over
  /// the group's shards) and runs this shard's part as the planned step below does.
  result<step_report> step(const rollout_batch& batch, train_stage stage);
  /// One step of `stage` as `plan` says: `batch` holds this shard's trajectories (only those its
  /// micro-batches use), `plan` its micro-batches in `batch`'s indices and the step's totals over
  /// every shard (the all-masked skip and the report read those). Micro-batches move to the
  /// models' device one at a time.
  result<step_report> step(const rollout_batch& batch, train_stage stage, const step_plan& plan);

  /// The critic's explained variance on `batch` (values against the Monte-Carlo returns: the
  /// trajectory's reward at every sampled token, gamma = 1), without training.
  result<double> value_explained_variance(const rollout_batch& batch);
  /// Token-mean NLL of the sampled tokens under the actor, without training.
  result<double> sampled_nll(const rollout_batch& batch);

  /// The actor.
  policy::decoder& actor() { return actor_; }
  /// The critic (only when created with one).
  policy::decoder& critic() { return *critic_; }
  /// True when a critic is present.
  bool has_critic() const { return critic_.has_value(); }
  /// The options (mutable between steps).
  trainer_options& options() { return options_; }
  /// Steps applied so far.
  int64_t steps() const { return steps_; }
  /// The parts a checkpoint saves and restores.
  std::vector<checkpoint_part> checkpoint_parts();
  /// Sets the step counter (after a checkpoint was loaded).
  void set_steps(int64_t steps) { steps_ = steps; }
  /// Sets the actor's learning rate for the next steps (an lr schedule's rate of the step).
  void set_actor_lr(double lr) {
    options_.actor_optimizer.lr = lr;
    actor_opt_.options().lr = lr;
  }
  /// Sets the temperature the log-probabilities are computed under (the sampler's).
  void set_temperature(double temperature) { options_.forward.temperature = temperature; }

 private:
  trainer(policy::decoder actor, std::optional<policy::decoder> critic, adamw actor_opt,
          std::optional<adamw> critic_opt, const trainer_options& options);
  status ppo_step(const rollout_batch& batch, const step_plan& plan, step_report& report);
  status rft_step(const rollout_batch& batch, const step_plan& plan, step_report& report);
  status vp_step(const rollout_batch& batch, const step_plan& plan, step_report& report);
  std::vector<rollout_batch> microbatches(const rollout_batch& batch, const step_plan& plan, step_report& report) const;
  result<aggregation> global_agg(aggregation agg, const std::vector<rollout_batch>& mbs);
  result<bool> sync_before_step(bool local_skip, bool actor, bool critic);
  bool data_parallel() const;
  /// The decoder a forward of the actor (or the critic) runs: the model itself in fp32 compute,
  /// else its compute copy (made on first use, again when the compute dtype changes).
  result<policy::decoder> compute_model(bool critic);

  policy::decoder actor_;
  std::optional<policy::decoder> critic_;
  adamw actor_opt_;
  std::optional<adamw> critic_opt_;
  std::optional<compute_copy> actor_copy_, critic_copy_;
  trainer_options options_;
  int64_t steps_ = 0;
};

}  // namespace caf_agent::learner
