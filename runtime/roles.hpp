#pragma once
/// runtime/roles.hpp: which actors each role starts.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/config.hpp"

namespace caf_agent::runtime {

/// The actors a role started, and how many of each kind (reported at registration).
struct role_actors {
  std::map<std::string, int64_t> counts;
  std::vector<caf::actor> actors;
  /// Named handles other roles of the same process wire to (e.g. "gpu_pool").
  std::map<std::string, caf::actor> named;
  /// Non-actor parts the role owns (the inference role's HTTP server); released
  /// by stop_role after the actors have stopped, in reverse order.
  std::vector<std::shared_ptr<void>> resources;
  /// Facts about the role operators should see (registered with the node, shown by the inspector).
  std::vector<std::string> notes;
};

/// Starts the actors of `role` (rollout, gpu-pool, learner, inference).
/// `peers` holds named actors of roles started earlier in the same process.
/// Returns an error message instead when a component cannot start.
std::string start_role(caf::actor_system& sys, messages::node_role role, const app_config& cfg,
                       const std::map<std::string, caf::actor>& peers, role_actors& out);

/// Stops every actor of a role and waits for them to finish.
void stop_role(caf::actor_system& sys, role_actors& actors);

}  // namespace caf_agent::runtime
