#pragma once
/// runtime/caf_setup.hpp: building CAF's actor system config from ours.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include "runtime/config.hpp"
#include "runtime/process.hpp"

namespace caf_agent::runtime {

/// The identifier nodes exchange in CAF's handshake; nodes of another
/// caf-agent protocol version refuse each other's connections.
std::string app_identifier();

/// Loads the middleman (and CAF's OpenSSL module when [cluster] sets TLS), registers every
/// message type, turns on CAF's heartbeats and sets scheduler threads from `cfg`.
void configure_caf(caf::actor_system_config& caf_cfg, const app_config& cfg);

/// Runs a role's `work(sys)` in an actor system configured from `cfg` and returns its exit code;
/// what is left of the exit once the work returned is bounded by an exit_deadline.
template <class Work>
int run_in_actor_system(const app_config& cfg, Work&& work) {
  caf::actor_system_config caf_cfg;
  configure_caf(caf_cfg, cfg);
  caf::actor_system sys{caf_cfg};
  exit_deadline deadline{node_exit_grace};
  return deadline.exit_with(work(sys));
}

}  // namespace caf_agent::runtime
