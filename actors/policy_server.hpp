#pragma once
/// actors/policy_server.hpp: serves a policy backend to episodes, and its typed protocol.
///
///   generate_request   -> completion (a backend failure is a completion with finish_reason error)
///   weights_published  -> std::string (error text, empty on success)
///   (atoms::stats)     -> std::map<std::string, double> (the backend's counters, plus `pending`)
///
/// One actor for every rollout::policy_backend, by its mode(): an immediate backend (sim,
/// replay) answers at once and the reply waits out its simulated latency on a timer; an
/// asynchronous one (the in-process engine) calls back from its own thread; a blocking one
/// (openai) runs on `concurrency` detached workers, one request at a time each. Every reply
/// comes back to the actor as a message and is delivered from one map of waiting requests.
/// weights_published runs where generate runs (a blocking backend's first worker).

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/type_ids.hpp"
#include "rollout/policy_backend.hpp"

namespace caf_agent {

/// What an episode needs of a policy: generate. The full server handle converts to it.
using policy_generator = caf::typed_actor<caf::replies_to<messages::generate_request>::with<messages::completion>>;

/// The policy server's protocol (see the file comment). Handles that arrive untyped (the
/// coordinator's service registry) are cast to it where they are received.
using policy_actor = policy_generator::extend<caf::replies_to<messages::weights_published>::with<std::string>,
                                              caf::replies_to<atoms::stats>::with<std::map<std::string, double>>>;

/// Spawns the server for `backend` (`concurrency`: the workers of a blocking backend).
policy_actor spawn_policy_server(caf::actor_system& sys, std::shared_ptr<rollout::policy_backend> backend,
                                 int32_t concurrency = 1);

}  // namespace caf_agent
