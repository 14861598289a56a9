#pragma once
/// messages/episode.hpp: tasks and the episode lifecycle.

#include <cstdint>
#include <string>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// One KernelBench-format problem: a PyTorch `Model` with get_inputs / get_init_inputs.
struct task_spec {
  std::string task_id;  ///< stable id, e.g. "level1/001_add_relu"
  std::string name;
  int32_t level = 1;
  std::string model_py;  ///< the task's model.py source
  CAF_AGENT_FIELDS(task_spec, task_id, name, level, model_py)
};

/// Coordinator -> rollout manager: run one episode.
struct start_episode {
  uint64_t episode_id = 0;
  task_spec task;
  episode_mode mode = episode_mode::train;
  int32_t max_turns = 150;
  int64_t wall_limit_ms = 0;  ///< 0 = no wall limit
  uint64_t seed = 0;
  int32_t attempt = 0;  ///< > 0 when re-run after a lost node
  /// The trainer's choices: the node's policy or its replay of the recorded demonstrations
  /// (train.rft.demonstrations); temperature < 0: the node's policy.temperature.
  episode_policy policy = episode_policy::node;
  float temperature = -1;
  CAF_AGENT_FIELDS(start_episode, episode_id, task, mode, max_turns, wall_limit_ms, seed, attempt, policy, temperature)
};

/// Rollout manager -> coordinator: a summary of how an episode ended (the full record
/// goes to the trajectory store).
struct episode_done {
  uint64_t episode_id = 0;
  std::string task_id;
  episode_end termination = episode_end::aborted;
  std::string reason;
  int32_t reward = 0;
  int32_t turns = 0;
  CAF_AGENT_FIELDS(episode_done, episode_id, task_id, termination, reason, reward, turns)
};

/// Rollout manager -> coordinator: how many more episodes it can take now (back-pressure).
/// The driver counts a node's episodes from its own sends and the node's records; it
/// takes only `limit` from this report (a report can be older than the driver's sends).
struct rollout_capacity {
  std::string node_id;
  int32_t free_slots = 0;
  int32_t running = 0;
  int32_t limit = 0;  ///< episodes the node runs at once (max_concurrent_episodes, or fewer: rollout.kv_admission)
  CAF_AGENT_FIELDS(rollout_capacity, node_id, free_slots, running, limit)
};

/// Rollout manager -> driver: an episode left the node's queue and began (its actor
/// exists). An episode of a lost node without this notice never started and is re-run.
struct episode_started {
  std::string node_id;
  uint64_t episode_id = 0;
  CAF_AGENT_FIELDS(episode_started, node_id, episode_id)
};

}  // namespace caf_agent::messages
