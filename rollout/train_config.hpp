#pragma once
/// rollout/train_config.hpp: [train] and its stage tables ([train.rft], ...), the trainer's plan
/// (defaults, the field lists that runtime/ reads TOML through and prints config/defaults.toml
/// from, checks). rollout/train_plan runs it; actors/trainer drives it.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/config_fields.hpp"
#include "base/named_enum.hpp"
#include "learner/lr_schedule.hpp"

namespace caf_agent::rollout {

/// A stage of [train] (train.stages, the stage tables [train.<name>]), in the recipe's order:
/// single-turn PPO warm-up, rejection fine-tuning, value pretraining, agentic PPO.
enum class stage_kind : uint8_t { single_turn_ppo, rft, value_pretrain, agentic_ppo };
CAF_AGENT_ENUM_NAMES(stage_kind, "single_turn_ppo", "rft", "value_pretrain", "agentic_ppo")

/// One stage of [train] (its own table, e.g. [train.rft]) and its stopping rule; what each
/// member means is said once, in fields(). Which keys a stage takes depends on its name.
struct train_stage_config {
  stage_kind kind;  ///< which stage (the table's name, not a key)
  int32_t iterations = 1;
  int32_t max_turns = 0;
  int32_t min_reward = 1;
  // Rationale: an agent that re-runs an identical call more than 3 times is stuck, not working.
  int32_t max_repeats = 3;
  std::string store;
  double min_explained_variance = 0.6;  ///< the paper's critic needs it
  int32_t max_steps = 20;
  bool stop_at_cap = false;
  std::string demonstrations;
  int32_t steps_per_iteration = 1;
  int32_t batch_sequences = 0;
  double actor_lr = 0;
  learner::lr_schedule_kind lr_schedule = learner::lr_schedule_kind::constant;
  std::vector<std::pair<int64_t, double>> lr_phases;
  int64_t warmup_steps = 0;
  double min_lr = 0;
  double temperature = -1;

  /// The stage's optimizer steps: iterations x steps_per_iteration.
  int64_t optimizer_steps() const { return int64_t{iterations} * steps_per_iteration; }
  /// The stage's episode turn limit: max_turns, or `rollout_turns` (rollout.max_turns_train) when 0.
  int32_t turn_limit(int32_t rollout_turns) const { return max_turns > 0 ? max_turns : rollout_turns; }
  /// The actor's lr schedule over the stage's optimizer steps, at actor_lr (the cosine's peak), or
  /// at `learner_lr` (learner.actor_lr) when actor_lr is 0.
  learner::lr_schedule schedule(double learner_lr) const {
    learner::lr_schedule out;
    out.kind = lr_schedule;
    out.lr = actor_lr > 0 ? actor_lr : learner_lr;
    out.phases = lr_phases;
    out.warmup_steps = warmup_steps;
    out.total_steps = optimizer_steps();
    out.min_lr = min_lr;
    return out;
  }
  /// A stage's defaults.
  explicit train_stage_config(stage_kind k = stage_kind::agentic_ppo, int32_t iters = 1, int32_t turns = 0)
      : kind(k), iterations(iters), max_turns(turns) {}

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    const bool rft = c.kind == stage_kind::rft, vp = c.kind == stage_kind::value_pretrain;
    f("iterations", c.iterations, "ppo stages and rft: training steps, then the next stage", positive());
    f("max_turns", c.max_turns, "episode turn limit; 0: rollout.max_turns_train (single_turn_ppo: 1)",
      at_least(0, "must be >= 0 (0: rollout.max_turns_train)"));
    if (rft) {
      f("min_reward", c.min_reward, "keep trajectories with reward >= this (the paper: r > 0)");
      f("max_repeats", c.max_repeats, "drop trajectories repeating one tool call more often",
        at_least(1, "must be >= 1"));
    }
    if (rft || vp) f("store", c.store, "train on this trajectory store's records; empty: fresh episodes");
    if (vp) {
      // Rationale: explained variance is at most 1; a gate above it could never open.
      f("min_explained_variance", c.min_explained_variance, "the gate", range(-1e9, 1));
      f("max_steps", c.max_steps, "the step cap when the gate is never reached", positive());
      f("stop_at_cap", c.stop_at_cap, "true: stop the run at the cap; false: say so and go on");
    }
    if (rft)
      f("demonstrations", c.demonstrations,
        "play these recordings once (replay, token-level with policy.model_dir's tokenizer, real sandbox and "
        "judge), then train every iteration on the kept ones; empty: none");
    f("steps_per_iteration", c.steps_per_iteration,
      "optimizer steps an iteration takes on its batch (one checkpoint and publication per iteration)", positive());
    f("batch_sequences", c.batch_sequences, "trajectories per optimizer step, round robin over the batch; 0: all",
      at_least(0, "must be >= 0 (0: the whole batch a step)"));
    f("actor_lr", c.actor_lr, "the stage's actor lr (constant, or the cosine's peak); 0: learner.actor_lr",
      at_least(0, "must be >= 0 (0: learner.actor_lr)"));
    f("lr_schedule", c.lr_schedule, "constant, phases (lr_phases) or cosine (warm-up, then decay to min_lr)");
    f("lr_phases", c.lr_phases, "phases: [[optimizer steps, lr], ...] in order, adding up to the stage's steps");
    f("warmup_steps", c.warmup_steps, "cosine: linear warm-up to actor_lr, then cosine decay ...");
    f("min_lr", c.min_lr, "... to this at the stage's last optimizer step");
    f("temperature", c.temperature, "sampling temperature of the stage's episodes; < 0: policy.temperature");
  }

  /// Rules between fields.
  void validate(base::config_errors& e) const {
    if (!demonstrations.empty() && !store.empty())
      e.error("demonstrations", "and store both name the stage's data; set one");
    using learner::lr_schedule_kind;
    if (lr_schedule == lr_schedule_kind::phases) {
      if (lr_phases.empty()) e.error("lr_phases", "is empty; lr_schedule = \"phases\" needs [[steps, lr], ...]");
      int64_t sum = 0;
      for (size_t i = 0; i < lr_phases.size(); ++i) {
        if (lr_phases[i].first < 1) e.error("lr_phases", "phase " + std::to_string(i + 1) + " has steps < 1");
        if (!(lr_phases[i].second >= 0)) e.error("lr_phases", "phase " + std::to_string(i + 1) + " has an lr < 0");
        sum += lr_phases[i].first;
      }
      // Rationale: a schedule longer or shorter than the stage is a mistake in one of the two;
      // naming both numbers beats a silent last-phase hold or a cut.
      if (kind != stage_kind::value_pretrain && !lr_phases.empty() && sum != optimizer_steps())
        e.error("lr_phases", "the phases hold " + std::to_string(sum) +
                                 " optimizer steps, the stage takes iterations x steps_per_iteration = " +
                                 std::to_string(optimizer_steps()));
    } else if (lr_schedule == lr_schedule_kind::cosine) {
      if (warmup_steps < 0 || warmup_steps > optimizer_steps())
        e.error("warmup_steps",
                "must lie in [0, iterations x steps_per_iteration = " + std::to_string(optimizer_steps()) + "]");
      if (!(min_lr >= 0)) e.error("min_lr", "must be >= 0");
    }
    if (!lr_phases.empty() && lr_schedule != lr_schedule_kind::phases)
      e.error("lr_phases",
              "is set but lr_schedule is \"" + to_string(lr_schedule) + "\" (set lr_schedule = \"phases\")");
    // Rationale: PPO recomputes the sampler's log-probabilities under its temperature; greedy
    // decoding (0) has none.
    if (temperature == 0 && kind != stage_kind::rft && kind != stage_kind::value_pretrain)
      e.error("temperature",
              "must be > 0 for a PPO stage (< 0: policy.temperature); greedy episodes have no log-probabilities to "
              "train on");
  }
};

/// [train.eval]: evaluation rounds of the trainer (before training and after each stage): fresh
/// episodes of the tasks with the current weights, judged for real (run_dir/eval-<stage>.json).
struct train_eval_config {
  int32_t episodes = 0;
  double temperature = 0;  ///< greedy: the reward of what was learned, not of luck
  int32_t max_turns = 0;

  /// A round's episode turn limit: max_turns, or `rollout_turns` (rollout.max_turns_eval) when 0.
  int32_t turn_limit(int32_t rollout_turns) const { return max_turns > 0 ? max_turns : rollout_turns; }

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("episodes", c.episodes, "episodes a round (task by episode id); 0: no rounds",
      at_least(0, "must be >= 0 (0: no evaluation rounds)"));
    f("temperature", c.temperature, "0: greedy", at_least(0, "must be >= 0 (0: greedy)"));
    f("max_turns", c.max_turns, "0: rollout.max_turns_eval", at_least(0, "must be >= 0 (0: rollout.max_turns_eval)"));
  }
  /// Rules between fields: none.
  void validate(base::config_errors&) const {}
};

/// [train]: the trainer (in the coordinator with --train, or in the local role).
struct train_config {
  bool enabled = false;
  std::vector<stage_kind> stages{stage_kind::agentic_ppo};
  int32_t episodes_per_iteration = 4;
  std::string run_dir;
  int32_t max_step_attempts = 5;
  int32_t max_empty_iterations = 3;
  bool async = false;
  // Rationale: one version behind is what one play-ahead iteration produces (slime's and
  // verl's one-step off-policy); the importance ratio of records older than that drifts.
  int32_t max_policy_lag = 1;
  train_stage_config single_turn_ppo{stage_kind::single_turn_ppo, 1, 1};
  train_stage_config rft{stage_kind::rft};
  train_stage_config value_pretrain{stage_kind::value_pretrain};
  train_stage_config agentic_ppo{stage_kind::agentic_ppo, 2};
  train_eval_config eval;

  /// The table of stage `k`.
  const train_stage_config& stage(stage_kind k) const {
    switch (k) {
      case stage_kind::single_turn_ppo:
        return single_turn_ppo;
      case stage_kind::rft:
        return rft;
      case stage_kind::value_pretrain:
        return value_pretrain;
      default:
        return agentic_ppo;
    }
  }
  /// True when the stages include rft with demonstrations (rollout nodes then load their replay).
  bool plays_demonstrations() const {
    return !rft.demonstrations.empty() && std::find(stages.begin(), stages.end(), stage_kind::rft) != stages.end();
  }

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("enabled", c.enabled, "local role: train (true) or play one round of episodes (false)");
    f("stages", c.stages, "in order: single_turn_ppo, rft, value_pretrain, agentic_ppo");
    f("episodes_per_iteration", c.episodes_per_iteration, "the global batch of one iteration", positive(),
      range(1, 10000000));
    f("run_dir", c.run_dir, "stage state, checkpoints, trajectories; empty: runtime.run_dir + \"/train\"");
    f("max_step_attempts", c.max_step_attempts, "a step failing this often (lost shards, errors) stops the run",
      positive());
    f("max_empty_iterations", c.max_empty_iterations,
      "consecutive iterations without training data (every episode failed) stop the run", positive());
    f("async", c.async,
      "true: play the next iteration's episodes while the learner steps and publishes (one iteration ahead, "
      "within a stage); false: after the new version is published");
    f("max_policy_lag", c.max_policy_lag,
      "async: train on a record only if its oldest policy version is >= the step's base version minus this "
      "(older ones are dropped as stale); 0: async plays nothing ahead",
      at_least(0, "must be >= 0 (0: no record older than the step's base version)"));
    f.section("single_turn_ppo", c.single_turn_ppo, "one reply holding model_new.py and the kernels, judged");
    f.section("rft", c.rft, "rejection fine-tuning of the actor on filtered trajectories");
    f.section("value_pretrain", c.value_pretrain,
              "the critic alone (actor frozen) until its explained variance reaches the gate");
    f.section("agentic_ppo", c.agentic_ppo, "PPO over whole agent episodes");
    f.section("eval", c.eval, "evaluation rounds: before training and after each stage, fresh episodes");
  }

  /// Rules between fields.
  void validate(base::config_errors& e) const {
    if (stages.empty()) e.error("stages", "must name at least one stage");
  }
};

}  // namespace caf_agent::rollout
