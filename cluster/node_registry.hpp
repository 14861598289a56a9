#pragma once
/// cluster/node_registry.hpp: the coordinator's view of the cluster, without CAF.
///
/// Pure bookkeeping: who registered, when each node was last heard from, which
/// nodes are stale (no heartbeat within the timeout), down (connection lost) or
/// left (clean shutdown). The coordinator actor feeds it events and a clock.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "messages/cluster.hpp"

namespace caf_agent::cluster {

/// A state change the coordinator reports.
struct node_event {
  std::string node_id;
  messages::node_state from = messages::node_state::joining;
  messages::node_state to = messages::node_state::joining;
  std::string reason;
};

/// Bookkeeping of registered nodes.
class node_registry {
 public:
  /// `timeout_ms`: how long without a heartbeat before a node is stale.
  explicit node_registry(int64_t timeout_ms) : timeout_ms_(timeout_ms) {}

  /// Checks a registration; returns the refusal reason, or nothing when accepted.
  std::optional<std::string> check(const messages::register_node& msg) const;

  /// Records an accepted registration (a re-registration replaces the old entry).
  node_event add(const messages::node_info& info, int64_t now_ms);

  /// Records a heartbeat; returns an event if the node came back from stale.
  std::optional<node_event> heartbeat(const messages::node_heartbeat& hb, int64_t now_ms);

  /// Marks a node down (its connection or actor is gone).
  std::optional<node_event> down(const std::string& node_id, const std::string& reason);

  /// Marks a node as having left on purpose.
  std::optional<node_event> left(const std::string& node_id, const std::string& reason);

  /// Marks nodes stale that have been silent longer than the timeout.
  std::vector<node_event> expire(int64_t now_ms);

  /// All nodes (optionally without those that left).
  std::vector<messages::node_status> snapshot(bool include_left) const;

  /// Number of nodes in state "up".
  size_t up_count() const;

 private:
  std::optional<node_event> transition(const std::string& node_id, messages::node_state to, const std::string& reason);
  int64_t timeout_ms_;
  std::map<std::string, messages::node_status> nodes_;
};

}  // namespace caf_agent::cluster
