#pragma once
/// actors/coordinator.hpp: the cluster's registry actor.
///
/// Accepts register_node from node agents (and monitors them), heartbeats,
/// leave_cluster; marks nodes stale after the timeout and down when their
/// connection is lost; answers get_cluster with a cluster_snapshot.

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

namespace caf_agent {

/// Settings of the coordinator actor.
struct coordinator_options {
  std::string coordinator_id;
  int64_t heartbeat_interval_ms = 500;
  int64_t node_timeout_ms = 3000;
};

/// Spawns the coordinator actor.
caf::actor spawn_coordinator(caf::actor_system& sys, coordinator_options opts);

}  // namespace caf_agent
