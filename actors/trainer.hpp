#pragma once
/// actors/trainer.hpp: the trainer: iterations of episodes, learner steps and weight publication.
///
/// One iteration: plan `episodes_per_iteration` episodes (rollout/train_plan: fresh ids, or the
/// unfinished iteration's ids on resume), play them through a run driver into the training run's
/// trajectory store (the driver skips episodes that already have a record), build the stage's
/// batch from the records as stored (rollout/training_set: infrastructure failures and filtered
/// records excluded and counted), send it to every learner shard (services "learner/<rank>"),
/// and once every shard answered, commit the iteration (train_state.json, atomically: the
/// episodes are consumed, the version moves on) and publish the new weights to every policy
/// service, each one timed. Synchronous by default: iteration k's episodes start after version
/// k - 1 was published. Asynchronous (`async`): iteration k + 1's episodes start as soon as
/// iteration k's batch is built, and play while its step runs and version k is published (one
/// iteration ahead, within a stage that plays fresh episodes: a stage boundary drains); its
/// records whose oldest policy version is below the step's base version minus
/// `max_policy_lag` are dropped as "stale" (counted with the other exclusions). The iteration
/// played ahead is planned in train_state.json (`ahead`) before it plays, so a resumed run plays
/// the same ids (the driver skips those with a record). A shard lost or failing mid-step fails
/// the attempt (recorded in iterations.jsonl); the same batch is sent again, with a new
/// process-group generation, once every shard is back. A stage ends by its stopping rule
/// (steps; value_pretrain: the explained-variance gate or its cap); the run ends after the last
/// stage, or with a clear message and a resumable state when a step keeps failing, iterations
/// bring no training data, or a policy service refuses weights.
///
/// An iteration may take several optimizer steps on its batch (`steps_per_iteration`, each on
/// the next `batch_sequences` trajectories, at the stage's lr schedule's rate of the step); one
/// checkpoint and one publication per iteration. A stage with `demonstrations` first plays them
/// (one episode per task, start_episode::policy = demonstrations: the rollout node's replay,
/// token-level, real sandbox and judge); its first iteration consumes those episodes and every
/// iteration trains on their kept records (train_state.json `stage_data`).
/// Evaluation rounds (`eval.episodes` > 0): before the first stage and after each stage, fresh
/// episodes with the current weights at `eval.temperature` into run_dir/eval-<stage>/, summed up
/// in run_dir/eval-<stage>.json (a round already written is not run again on resume); the run's
/// last line is the table of every round.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "learner/lr_schedule.hpp"
#include "messages/episode.hpp"
#include "rollout/train_config.hpp"

namespace caf_agent {

/// One stage and its stopping rule (see [train.<stage>] in config/local.toml).
struct trainer_stage {
  rollout::stage_kind kind = rollout::stage_kind::agentic_ppo;
  int32_t iterations = 1;
  int32_t max_turns = 150;
  int32_t min_reward = 1;
  int32_t max_repeats = 3;
  std::string store;  ///< records of this store instead of fresh episodes
  double min_explained_variance = 0.6;
  int32_t max_steps = 20;
  bool stop_at_cap = false;
  std::string demonstrations;       ///< rft: play the recordings once (the rollout nodes' replay), train on them
  int32_t steps_per_iteration = 1;  ///< optimizer steps an iteration takes on its batch
  int32_t batch_sequences = 0;      ///< trajectories per optimizer step, round robin; 0: the whole batch
  learner::lr_schedule schedule;    ///< the actor's lr of each optimizer step of the stage
  float temperature = -1;           ///< the stage's episodes' sampling temperature; < 0: the policy's
};

/// The evaluation rounds (before training, after each stage): fresh episodes, real judge.
struct trainer_eval {
  int32_t episodes = 0;   ///< 0: none
  float temperature = 0;  ///< 0: greedy
  int32_t max_turns = 200;
};

/// Exit codes of a training run.
enum trainer_exit : int {
  trainer_ok = 0,
  trainer_bad_input = 2,
  trainer_storage = 4,
  trainer_weights_refused = 5,
  trainer_step_failed = 6,
  trainer_no_data = 7,
  trainer_gate_not_reached = 8,
};

/// Settings of the trainer.
struct trainer_options {
  std::vector<trainer_stage> stages;
  int32_t episodes_per_iteration = 4;
  std::string run_dir;                     ///< train_state.json, iterations.jsonl, trajectories/, checkpoints/
  std::vector<messages::task_spec> tasks;  ///< cycled by episode id
  int64_t wall_limit_ms = 0;
  uint64_t seed = 1;
  int32_t shards = 1;  ///< learner shards a step needs
  /// The shards' learner.max_tokens_per_microbatch: the trainer plans each shard's slice with it.
  int64_t max_tokens_per_microbatch = 0;
  bool stage_in_process = false;  ///< the engines share this process: hand them tensors, not files
  int32_t max_step_attempts = 5;
  int32_t max_empty_iterations = 3;
  bool retry_aborted = false;
  bool async = false;          ///< play the next iteration while the step runs (see the file comment)
  int32_t max_policy_lag = 1;  ///< async: the oldest version a trained record may carry, behind the base
  trainer_eval eval;
  nlohmann::json settings;  ///< the run-shaping settings (a run directory of other ones is refused)
  caf::actor coordinator;
  std::function<void(int code, const std::string& summary)> on_finished;
};

/// Reads or creates the run directory's state and spawns the trainer. Returns nullptr and sets
/// `error` when the directory belongs to another config or its state cannot be read or written.
caf::actor spawn_trainer(caf::actor_system& sys, trainer_options opts, std::string& error);

}  // namespace caf_agent
