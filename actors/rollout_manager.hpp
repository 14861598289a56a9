#pragma once
/// actors/rollout_manager.hpp: a rollout node's episode admission.
///
/// Receives start_episode from the run driver, admits at most
/// `max_concurrent` episodes and only while the GPU pool has credits (back-
/// pressure: no new episodes while the pool's queue is full), spawns episode
/// actors, forwards their trajectory records to the driver and reports its free
/// capacity (rollout_capacity) after every change. Finds the GPU pool through
/// the coordinator and re-finds it if it is lost.

#include <functional>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/episode.hpp"

namespace caf_agent {

/// Settings of a rollout manager.
struct rollout_manager_options {
  int max_concurrent = 4;
  std::string node_id;
  caf::actor coordinator;  ///< for service lookups (gpu_pool)
  caf::actor pool;         ///< set when known up front (local role)
  episode_env env;         ///< policy, tools, limits; pool and sink are filled in
};

/// Spawns the manager; it announces itself as service "rollout" to the coordinator.
caf::actor spawn_rollout_manager(caf::actor_system& sys, rollout_manager_options opts);

}  // namespace caf_agent
