#pragma once
/// runtime/caf_setup.hpp: building CAF's actor system config from ours.

#include <caf/actor_system_config.hpp>

#include "runtime/config.hpp"

namespace caf_agent::runtime {

/// The identifier nodes exchange in CAF's handshake; nodes of another
/// caf-agent protocol version refuse each other's connections.
std::string app_identifier();

/// Loads the middleman (and CAF's OpenSSL module when [cluster] sets TLS), registers every
/// message type, turns on CAF's heartbeats and sets scheduler threads from `cfg`.
void configure_caf(caf::actor_system_config& caf_cfg, const app_config& cfg);

}  // namespace caf_agent::runtime
