#pragma once
/// actors/coordinator.hpp: the cluster's registry actor.
///
/// Accepts register_node from node agents (and monitors them), heartbeats,
/// leave_cluster; marks nodes stale after the timeout and down when their
/// connection is lost; answers get_cluster with a cluster_snapshot. Aggregates the
/// metrics the heartbeats carry (observe/cluster_view.hpp) and answers get_view with
/// a view as JSON text (`episode ID`: the transcript, from the episode's rollout node).

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

#include "observe/stuck.hpp"

namespace caf_agent {

/// Settings of the coordinator actor.
struct coordinator_options {
  std::string coordinator_id;
  int64_t heartbeat_interval_ms = 500;
  int64_t node_timeout_ms = 3000;
  observe::stuck_options stuck;  ///< when an episode in flight counts as stuck
};

/// Spawns the coordinator actor.
caf::actor spawn_coordinator(caf::actor_system& sys, coordinator_options opts);

}  // namespace caf_agent
