#pragma once
/// actors/rollout_manager.hpp: a rollout node's episode admission.
///
/// Receives start_episode from the run driver, admits at most rollout.max_concurrent_episodes
/// episodes (fewer with rollout.kv_admission, when the policy engine's KV cache would not hold
/// their conversations: kv_capacity_tokens)
/// and only while some GPU pool admits work (back-pressure: no new episodes
/// while every pool's queue is full), spawns episode actors (telling the driver each
/// one started: episode_started), forwards their trajectory records to the driver and
/// reports its capacity and limit (rollout_capacity) after every change.
///
/// Every GPU pool the coordinator announces is used, as one logical pool: each
/// evaluation goes to the pool `rollout::choose_pool` picks from the pools' credit
/// reports and this manager's own sends since (a pool that joins gets work at once).
/// The evaluations of a lost pool go to another one (or wait for one to join); stats
/// count the evaluations each pool node answered (`evals@NODE`).

#include <functional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/episode.hpp"
#include "actors/gpu_pool.hpp"
#include "rollout/config.hpp"

namespace caf_agent {

/// Settings of a rollout manager: [rollout] as TOML gave it, and what the node adds.
struct rollout_manager_options {
  /// [rollout]: max_concurrent_episodes (episodes at once), kv_admission (also bound them by
  /// the engine's KV cache, below).
  rollout::rollout_config rollout;
  /// The policy engine's KV storage in tokens when it runs in this process (0: unknown): with
  /// rollout.kv_admission, episodes at once are also bounded by it over the expected context
  /// (rollout/kv_admission.hpp), starting from `kv_initial_context` tokens.
  int64_t kv_capacity_tokens = 0;
  int64_t kv_initial_context = 0;
  std::string node_id;
  caf::actor coordinator;  ///< for service lookups (gpu_pool)
  pool_actor pool;         ///< set when known up front (local role)
  episode_env env;         ///< policy, tools, limits; pool and sink are filled in
  /// The replay of train.rft.demonstrations (token-level), for episodes whose
  /// start_episode::policy is demonstrations; null: such episodes are recorded aborted.
  policy_generator demonstrations;
};

/// Spawns the manager; it announces itself as service "rollout" to the coordinator.
caf::actor spawn_rollout_manager(caf::actor_system& sys, rollout_manager_options opts);

}  // namespace caf_agent
