#pragma once
/// messages/cluster.hpp: node registration, liveness, and the cluster snapshot.

#include <charconv>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Bumped whenever a message's fields change; nodes of another version are refused.
inline constexpr uint32_t protocol_version = 14;  // 2: generate_request.messages_json; 3: node_info.notes;
                                                  // 4: node_heartbeat.metrics; 5: enums (eval mode
                                                  // and status, tool status, finish reason); 6: node_state
                                                  // 7: episode_end (termination); 8: eval_mode baseline
                                                  // 9: episode_mode; 10: node_role
                                                  // 11: learner_stage (train_batch.stage)
                                                  // 12: episode_policy (start_episode.policy)
                                                  // 13: train_batch per shard (its slice, the plan)
                                                  // 14: view_kind (get_view.what)

/// What a node tells the coordinator about itself when it joins.
struct node_info {
  std::string node_id;  ///< unique per process: role@host:pid
  node_role role = node_role::rollout;
  std::string host;
  int32_t pid = 0;
  int32_t cores = 0;
  int32_t gpus = 0;
  std::map<std::string, int64_t> actor_counts;  ///< actor kind -> how many it runs
  int64_t started_at_ms = 0;                    ///< unix epoch milliseconds
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

/// One actor kind of a process, named as CAF 1.x names its metrics (label `name` = kind):
/// caf.system.running-actors, caf.actor.mailbox-size, caf.actor.processing-time.
struct actor_kind_metrics {
  std::string kind;                           ///< the actor's state name: episode, gpu_pool, coordinator, ...
  int64_t running = 0;                        ///< caf.system.running-actors
  int64_t spawned = 0;                        ///< since the process started
  int64_t mailbox_size = 0;                   ///< caf.actor.mailbox-size, summed over running actors (last seen)
  int64_t mailbox_peak = 0;                   ///< the largest mailbox one actor of this kind had
  int64_t processed = 0;                      ///< messages handled
  int64_t processing_us = 0;                  ///< caf.actor.processing-time, total
  std::vector<int64_t> processing_buckets;    ///< histogram over observe::histogram bounds
  int64_t errors = 0;                         ///< actors that exited with an error
  int64_t restarts = 0;                       ///< restarts of what the kind owns (an eval worker), with reasons
  std::vector<std::string> restart_reasons;   ///< the last few errors and restarts, newest last
  std::map<std::string, int64_t> handled;     ///< message type -> messages handled
  std::map<std::string, int64_t> handled_us;  ///< message type -> processing time
  CAF_AGENT_FIELDS(actor_kind_metrics, kind, running, spawned, mailbox_size, mailbox_peak, processed, processing_us,
                   processing_buckets, errors, restarts, restart_reasons, handled, handled_us)
};

/// One running actor among the busiest of its process (by mailbox or processing time).
struct actor_top {
  std::string kind;
  uint64_t id = 0;  ///< CAF actor id (unique within its process)
  int64_t mailbox_size = 0;
  int64_t mailbox_peak = 0;
  int64_t processed = 0;
  int64_t busy_us = 0;
  CAF_AGENT_FIELDS(actor_top, kind, id, mailbox_size, mailbox_peak, processed, busy_us)
};

/// An episode in flight, as its rollout node sees it.
struct episode_progress {
  uint64_t episode_id = 0;
  std::string task_id;
  std::string node_id;
  int32_t turn = 0;
  int32_t max_turns = 0;
  int64_t tokens = 0;           ///< context tokens (exact in token mode, else estimated)
  uint64_t policy_version = 0;  ///< of the last completion
  std::string phase;            ///< opening, generating, tool:NAME, eval:MODE, closing
  int64_t started_at_ms = 0;
  int64_t last_progress_ms = 0;  ///< last completion or tool/eval result
  int64_t turn_started_ms = 0;
  int32_t tool_calls = 0;
  double tool_ms = 0;     ///< time spent in tool calls so far
  int32_t repeats = 0;    ///< the last tool call repeated this many times in a row (1: once)
  std::string last_call;  ///< NAME ARGS of the last call (truncated)
  CAF_AGENT_FIELDS(episode_progress, episode_id, task_id, node_id, turn, max_turns, tokens, policy_version, phase,
                   started_at_ms, last_progress_ms, turn_started_ms, tool_calls, tool_ms, repeats, last_call)
};

/// A GPU pool of a process: slots and the wait for one.
struct pool_metrics {
  std::string name;
  int32_t slots = 0;
  int32_t healthy = 0;  ///< slots - healthy = quarantined
  int32_t busy = 0;
  int32_t queued = 0;    ///< in the slot queue and parked
  int32_t building = 0;  ///< waiting for or in a builder
  int64_t jobs_done = 0;
  int64_t infra_failures = 0;
  std::vector<int64_t> wait_buckets;  ///< queue wait (enqueue to slot), observe::histogram bounds
  CAF_AGENT_FIELDS(pool_metrics, name, slots, healthy, busy, queued, building, jobs_done, infra_failures, wait_buckets)
};

/// What a process reports with its heartbeats (one registry per process).
struct node_metrics {
  std::string process;  ///< host:pid: several nodes of one process (the local role) share it
  int64_t sampled_at_ms = 0;
  std::vector<actor_kind_metrics> kinds;
  std::vector<actor_top> top;
  std::vector<episode_progress> episodes;
  std::vector<int64_t> turn_buckets;  ///< durations of the turns finished here
  std::vector<pool_metrics> pools;
  CAF_AGENT_FIELDS(node_metrics, process, sampled_at_ms, kinds, top, episodes, turn_buckets, pools)
};

/// Periodic liveness and load report from a node's agent.
struct node_heartbeat {
  std::string node_id;
  std::map<std::string, int64_t> counters;
  int64_t sent_at_ms = 0;
  node_metrics metrics;  ///< since protocol 4
  CAF_AGENT_FIELDS(node_heartbeat, node_id, counters, sent_at_ms, metrics)
};

/// Inspector -> coordinator: one view of the cluster (JSON; prometheus: text).
struct get_view {
  view_kind what = view_kind::nodes;
  std::string arg;  ///< episode: its id
  CAF_AGENT_FIELDS(get_view, what, arg)
};

/// Where a node stands with the coordinator (node_status.state).
enum class node_state : uint8_t {
  joining,  ///< not registered yet (named "new": the state a first registration leaves)
  up,
  stale,  ///< no heartbeat within the timeout
  down,   ///< its connection or agent is gone
  left,   ///< it left on purpose
};
CAF_AGENT_ENUM_NAMES(node_state, "new", "up", "stale", "down", "left")

/// A node as the coordinator sees it.
struct node_status {
  node_info info;
  node_state state = node_state::joining;
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

/// A service actor announces itself; the sender is the service. `name` is service_name(kind)
/// (a learner shard's with its rank); the coordinator answers lookups with its handle.
struct service_announce {
  std::string node_id;
  std::string name;
  CAF_AGENT_FIELDS(service_announce, node_id, name)
};

/// The name a service of kind `k` announces: the kind's name ("gpu_pool", "rollout", "policy").
inline std::string service_name(service_kind k) {
  return to_string(k);
}

/// A learner shard's service name: "learner/<rank>".
inline std::string service_name(service_kind k, int32_t rank) {
  return to_string(k) + "/" + std::to_string(rank);
}

/// A service name read back: its kind, and a learner shard's rank (0 for the others).
struct service_id {
  service_kind kind = service_kind::gpu_pool;
  int32_t rank = 0;
};

/// What a service name names: a kind's name, or "learner/<rank>" (a learner shard's); nullopt
/// for any other name (also "learner" without a rank, or a rank after another kind).
inline std::optional<service_id> parse_service_name(std::string_view name) {
  const auto slash = name.find('/');
  const auto kind = parse_name<service_kind>(name.substr(0, slash));
  if (!kind || (*kind == service_kind::learner) != (slash != std::string_view::npos)) return std::nullopt;
  if (*kind != service_kind::learner) return service_id{*kind, 0};
  const auto digits = name.substr(slash + 1);
  int32_t rank = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || rank < 0) return std::nullopt;
  return service_id{*kind, rank};
}

/// True when `name` is the name of a service of kind `k` (any learner shard's for learner).
inline bool is_service(std::string_view name, service_kind k) {
  const auto id = parse_service_name(name);
  return id && id->kind == k;
}

/// Coordinator -> run driver: a node went down or left; its work is lost.
struct node_lost {
  std::string node_id;
  std::string reason;
  CAF_AGENT_FIELDS(node_lost, node_id, reason)
};

}  // namespace caf_agent::messages
