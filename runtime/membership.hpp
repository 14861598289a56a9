#pragma once
/// runtime/membership.hpp: a node joining and leaving the coordinator.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "messages/cluster.hpp"

namespace caf_agent::runtime {

/// What this process tells the coordinator about itself (`notes`: what operators should see).
messages::node_info describe_node(const std::string& node_id, messages::node_role role,
                                  const std::map<std::string, int64_t>& actor_counts,
                                  const std::vector<std::string>& notes = {});

/// Registers `info` through a new node agent (returned in `agent`); blocks until
/// the coordinator accepts or refuses. Returns "" or the error. `on_lost` (may be
/// empty) is called if the coordinator is lost after joining.
std::string join_cluster(caf::actor_system& sys, caf::actor coordinator, messages::node_info info, int64_t timeout_ms,
                         std::function<void(const std::string&)> on_lost, caf::actor& agent);

/// Leaves cleanly: the agent sends leave_cluster and stops; waits for it.
void leave_cluster(caf::actor_system& sys, caf::actor agent, const std::string& reason);

}  // namespace caf_agent::runtime
