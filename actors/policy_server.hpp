#pragma once
/// actors/policy_server.hpp: serves a policy backend to episodes.
///
/// generate_request -> completion. Non-blocking backends (sim, replay) answer
/// after their simulated latency via a timer; blocking backends run on a
/// `concurrency` detached workers (each one request at a time).

#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>

#include "rollout/policy_backend.hpp"

namespace caf_agent {

/// Spawns the server for `backend`.
caf::actor spawn_policy_server(caf::actor_system& sys, std::shared_ptr<rollout::policy_backend> backend,
                               int32_t concurrency = 1);

}  // namespace caf_agent
