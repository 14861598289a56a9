#pragma once
/// actors/node_agent.hpp: a node's representative at the coordinator.
///
/// Registers the node, sends heartbeats with its counters and the process's metrics
/// (observe/registry.hpp), watches the
/// coordinator, and leaves cleanly on `atoms::stop`. Outcomes (registered,
/// refused, coordinator lost) reach the process through `node_agent_events`.

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <caf/fwd.hpp>

#include "messages/cluster.hpp"

namespace caf_agent {

/// Callbacks from the node agent to its process (called on an actor thread).
struct node_agent_events {
  std::function<void()> registered;
  std::function<void(const std::string& why)> failed;  ///< refused, timed out, or lost
  /// Current counters to report with each heartbeat (may be empty).
  std::function<std::map<std::string, int64_t>()> counters;
};

/// Spawns the agent; it registers `info` with `coordinator` right away.
caf::actor spawn_node_agent(caf::actor_system& sys, caf::actor coordinator, messages::node_info info,
                            int64_t register_timeout_ms, node_agent_events events);

}  // namespace caf_agent
