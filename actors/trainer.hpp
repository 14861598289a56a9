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

#include "learner/config.hpp"
#include "messages/episode.hpp"
#include "rollout/config.hpp"
#include "rollout/train_config.hpp"

namespace caf_agent {

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

/// Settings of the trainer: the config sections it reads, as TOML gave them (each field's
/// meaning is said once, in its struct's field list), and what the run adds to them.
struct trainer_options {
  /// [train]: the stages and their tables, the batch, the attempts, async, evaluation rounds;
  /// run_dir resolved (train_state.json, iterations.jsonl, trajectories/, checkpoints/).
  rollout::train_config train;
  /// [rollout]: the turn limits a stage's or round's max_turns = 0 stands for, the episodes'
  /// wall limit, retry_aborted.
  rollout::rollout_config rollout;
  /// [learner]: the actor_lr a stage's actor_lr = 0 stands for, max_tokens_per_microbatch (the
  /// trainer plans each shard's slice with it), shards (the shards a step needs; 1 when the
  /// learner runs in this process).
  learner::learner_config learner;
  std::vector<messages::task_spec> tasks;  ///< cycled by episode id
  uint64_t seed = 1;                       ///< the episodes' seeds derive from it
  bool stage_in_process = false;           ///< the engines share this process: hand them tensors, not files
  nlohmann::json settings;                 ///< the run-shaping settings (a run directory of other ones is refused)
  caf::actor coordinator;
  std::function<void(int code, const std::string& summary)> on_finished;
};

/// Reads or creates the run directory's state and spawns the trainer. Returns nullptr and sets
/// `error` when the directory belongs to another config or its state cannot be read or written.
caf::actor spawn_trainer(caf::actor_system& sys, trainer_options opts, std::string& error);

}  // namespace caf_agent
