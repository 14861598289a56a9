#pragma once
/// messages/cluster.hpp: node registration, liveness, and the cluster snapshot.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Bumped whenever a message's fields change; nodes of another version are refused.
inline constexpr uint32_t protocol_version = 3;  // 2: generate_request.messages_json; 3: node_info.notes

/// What a node tells the coordinator about itself when it joins.
struct node_info {
  std::string node_id;   ///< unique per process: role@host:pid
  std::string role;      ///< coordinator, rollout, gpu-pool, learner, inference, local
  std::string host;
  int32_t pid = 0;
  int32_t cores = 0;
  int32_t gpus = 0;
  std::map<std::string, int64_t> actor_counts;  ///< actor kind -> how many it runs
  int64_t started_at_ms = 0;                     ///< unix epoch milliseconds
  /// What operators should know about the node, e.g. "sandbox: no per-episode cgroup: why".
  std::vector<std::string> notes;
  CAF_AGENT_FIELDS(node_info, node_id, role, host, pid, cores, gpus, actor_counts, started_at_ms, notes)
};

/// A node asks to join; the sender is the node's agent actor, which the coordinator monitors.
struct register_node {
  uint32_t version = protocol_version;
  node_info info;
  CAF_AGENT_FIELDS(register_node, version, info)
};

/// The coordinator's answer to register_node.
struct register_ack {
  bool accepted = false;
  std::string reason;  ///< why it was refused, empty when accepted
  int64_t heartbeat_interval_ms = 0;
  CAF_AGENT_FIELDS(register_ack, accepted, reason, heartbeat_interval_ms)
};

/// Periodic liveness and load report from a node's agent.
struct node_heartbeat {
  std::string node_id;
  std::map<std::string, int64_t> counters;
  int64_t sent_at_ms = 0;
  CAF_AGENT_FIELDS(node_heartbeat, node_id, counters, sent_at_ms)
};

/// A node as the coordinator sees it.
struct node_status {
  node_info info;
  std::string state;  ///< up, stale (no heartbeat within the timeout), down, left
  int64_t last_seen_ms = 0;
  std::string reason;  ///< why it is stale/down/left
  std::map<std::string, int64_t> counters;
  CAF_AGENT_FIELDS(node_status, info, state, last_seen_ms, reason, counters)
};

/// Request for the live cluster view (the inspector sends this).
struct get_cluster {
  bool include_left = true;
  CAF_AGENT_FIELDS(get_cluster, include_left)
};

/// The live cluster view.
struct cluster_snapshot {
  std::string coordinator_id;
  int64_t now_ms = 0;
  std::vector<node_status> nodes;
  CAF_AGENT_FIELDS(cluster_snapshot, coordinator_id, now_ms, nodes)
};

/// A node leaves on purpose (clean shutdown).
struct leave_cluster {
  std::string node_id;
  std::string reason;
  CAF_AGENT_FIELDS(leave_cluster, node_id, reason)
};

/// A service actor (gpu_pool, rollout, policy, store) announces itself; the
/// sender is the service. The coordinator answers lookups with its handle.
struct service_announce {
  std::string node_id;
  std::string name;
  CAF_AGENT_FIELDS(service_announce, node_id, name)
};

/// Coordinator -> run driver: a node went down or left; its work is lost.
struct node_lost {
  std::string node_id;
  std::string reason;
  CAF_AGENT_FIELDS(node_lost, node_id, reason)
};

}  // namespace caf_agent::messages
