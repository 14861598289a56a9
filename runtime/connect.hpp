#pragma once
/// runtime/connect.hpp: publishing the coordinator and joining it, with clear errors.

#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "runtime/config.hpp"

namespace caf_agent::runtime {

/// Outcome of publishing the coordinator.
struct publish_result {
  bool ok = false;
  uint16_t port = 0;
  std::string error;
};

/// Publishes `coordinator` on host:port (port 0 = any free port). The listening socket
/// has SO_REUSEADDR, so a coordinator restarted on its port binds it at once (the
/// last one's connections in TIME_WAIT do not block it; a live listener still does).
publish_result publish_coordinator(caf::actor_system& sys, caf::actor coordinator, const std::string& host, int port,
                                   bool tls = false);

/// Spawns the coordinator actor as `id` and publishes it on [cluster] listen_host:port (over
/// TLS when [cluster] sets it; plaintext only on a loopback address).
/// Returns it and sets `port` to the bound port; on failure logs the one-line
/// error, stops the actor and returns an invalid handle.
caf::actor start_coordinator(caf::actor_system& sys, const app_config& cfg, const std::string& id, uint16_t& port);

/// Outcome of connecting to the coordinator.
struct connect_result {
  bool ok = false;
  caf::actor handle;
  std::string error;
  /// The address and files were fine but the peer could not be reached (nothing listening,
  /// a dropped connection): worth another attempt while the coordinator starts.
  bool retryable = false;
};

/// Connects to "HOST:PORT" (over TLS when `cluster` sets it; plaintext only to a loopback
/// address, else an error without connecting). A peer that accepts but never completes CAF's
/// handshake (not a caf-agent coordinator) cannot be cancelled in CAF 0.17, so
/// after `timeout_ms` this logs the error and ends the process with code 2 (or, with
/// `exit_on_hang` false, returns the error and leaves the stuck attempt behind).
connect_result connect_coordinator(caf::actor_system& sys, const cluster_config& cluster, const std::string& address,
                                   int64_t timeout_ms, bool exit_on_hang = true);

}  // namespace caf_agent::runtime
