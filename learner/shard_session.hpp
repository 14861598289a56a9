#pragma once
// shard_session: one data-parallel learner shard (its actor and critic, optimizers, process group)
// behind a header without torch types, so the actor that drives it (actors/learner_shard) compiles
// without LibTorch's headers. Each run() takes the shard's slice of the batch as plain vectors
// (the trajectories its micro-batches use, and the plan of every step) and:
//   1. joins the process group of the step's generation (a new generation after a shard was lost:
//      the old group is poisoned, every shard rendezvouses again);
//   2. makes sure the models hold the step's base version: a shard that is fresh, failed a step,
//      or holds another version loads the base checkpoint (or the base model for version 0), so
//      a restarted shard and a survivor start the retried step from the same weights;
//   3. trains the step (learner/trainer: its share of the batch, gradients all-reduced): one
//      optimizer step, or one per entry of `actor_lrs`, each as the trainer planned it
//      (learner/batch_plan: the shard's micro-batches of that step; the RFT recipe's one
//      trajectory a step is a plan whose steps each hold one trajectory on one shard);
//   4. on rank 0, writes the checkpoint of the new version (replacing one an unacknowledged
//      earlier attempt left) and, when asked, stages the actor's tensors for an engine of this
//      process (policy/model/weight_exchange).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "learner/batch_plan.hpp"
#include "learner/config.hpp"
#include "learner/result.hpp"

namespace caf_agent::learner {

/// Where a shard runs and how it trains: the [learner] settings (learner/config.hpp; `shards` is
/// the world size, `rank` this shard, `model_dir` resolved by the caller) and what the run adds.
struct shard_options : learner_config {
  shard_options() = default;
  explicit shard_options(learner_config settings) : learner_config(std::move(settings)) {}
  std::string checkpoint_root;  ///< rank 0 writes step-<version>/ here
  double temperature = 1.0;     ///< the sampler's temperature (log-probabilities are recomputed under it)
};

/// This shard's slice of the batch of one iteration, as the rollout stored it
/// (rollout/training_set), and the plan of its optimizer steps (learner/batch_plan).
struct shard_batch {
  std::string stage;  ///< ppo, rft or vp
  std::vector<int32_t> tokens;
  std::vector<int64_t> seq_offsets;
  std::vector<uint8_t> loss_mask;
  std::vector<float> sampler_logp;
  std::vector<float> rewards;
  /// The actor's lr of each optimizer step on this batch (an lr schedule's rates); empty: one
  /// step at the configured actor_lr.
  std::vector<double> actor_lrs;
  double temperature = 0;  ///< the episodes' sampling temperature; 0: the configured one
  /// One per optimizer step (as many as actor_lrs, or one): this shard's micro-batches in the
  /// indices of the trajectories above, and the step's totals over every shard.
  std::vector<step_plan> steps;
  /// What the plan was made for: the shard (rank), the world and the token budget; a shard whose
  /// own settings differ refuses the step (every node must read the same [learner] settings).
  int64_t rank = 0;
  int64_t shards = 1;
  int64_t max_tokens_per_microbatch = 0;
};

/// What a step starts from and produces.
struct shard_step {
  uint64_t base_version = 0;      ///< the weights the step starts from
  std::string base_checkpoint;    ///< their checkpoint ("" for version 0: the base model)
  uint64_t new_version = 1;       ///< the version the step produces
  uint64_t generation = 0;        ///< process-group generation (bumped when the shard set changed)
  bool save_checkpoint = true;    ///< rank 0 writes the new version's checkpoint
  bool stage_in_process = false;  ///< rank 0 stages the actor's tensors for an engine of this process
};

/// What one step did (this shard's view; losses are this shard's share of the global sum).
struct shard_step_outcome {
  bool applied = false;
  std::string skip_reason;
  std::string report_json;  ///< learner::step_report::to_json
  double policy_loss = 0;
  double value_loss = 0;
  double explained_variance = 0;
  double entropy = 0;
  double nll = 0;
  int64_t sampled_tokens = 0;   ///< of the global batch (the last optimizer step's)
  int64_t optimizer_steps = 0;  ///< steps taken on the batch
  double nll_mean = 0;          ///< the mean over those steps of the NLL (rft)
  std::string checkpoint;       ///< rank 0 with save_checkpoint: the new version's directory
  std::string in_process_path;  ///< rank 0 with stage_in_process: "inproc:<key>" for load_weights
  bool reloaded = false;        ///< the base version was loaded for this step
  double prepare_seconds = 0;   ///< rendezvous and loading
  double step_seconds = 0;
  double save_seconds = 0;
  double stage_seconds = 0;
};

/// One shard. Not thread-safe: one thread calls run().
class shard_session {
 public:
  /// Checks the options; loads nothing yet (the first run() does).
  static result<std::unique_ptr<shard_session>> create(const shard_options& options);
  ~shard_session();
  shard_session(const shard_session&) = delete;
  shard_session& operator=(const shard_session&) = delete;

  /// One training step (see the file comment). An error (a peer died mid all-reduce, a bad batch,
  /// a checkpoint that cannot be read) leaves the shard needing a reload and a new group.
  result<shard_step_outcome> run(const shard_batch& batch, const shard_step& step);

  /// The weights version the shard holds (0 before the first step).
  uint64_t version() const;
  /// True when gloo (CPU) or NCCL (CUDA) groups can be built here.
  static bool backend_available(dp_backend backend);

 private:
  struct impl;
  explicit shard_session(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

}  // namespace caf_agent::learner
