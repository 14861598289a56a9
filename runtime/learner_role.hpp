#pragma once
/// runtime/learner_role.hpp: the learner role's actors (one shard) and the trainer's settings.

#include <map>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <nlohmann/json.hpp>

#include "runtime/config.hpp"
#include "runtime/roles.hpp"

namespace caf_agent::runtime {

/// Starts this node's learner shard (rank cfg.learner.rank of learner.shards) and announces it
/// to the coordinator as service "learner/<rank>". Without LibTorch the node registers with no
/// shard and says why. Returns an error message when the shard cannot start.
std::string start_learner_role(caf::actor_system& sys, const app_config& cfg, const std::string& node_id,
                               const std::map<std::string, caf::actor>& peers, role_actors& out);

/// The settings that shape a training run (stages and their rules, the batch, the model, the
/// tasks, the learner's hyperparameters): a run directory made with other ones is refused.
nlohmann::json training_settings(const app_config& cfg);

}  // namespace caf_agent::runtime
