#pragma once
/// observe/cluster_view.hpp: the coordinator's aggregate of every process's metrics.
///
/// Heartbeats bring each process's `node_metrics` (several nodes of one process, as in
/// the local role, share one entry: the key is host:pid). The view runs the stuck
/// detector, counts what it flagged, and renders what the inspector, the Prometheus
/// endpoint and the metrics JSONL show. Only processes with a node up or stale (or
/// the coordinator's own) count: a lost node's episodes are no longer in flight.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "messages/cluster.hpp"
#include "observe/run_board.hpp"
#include "observe/stuck.hpp"

namespace caf_agent::observe {

/// What a view is rendered from, besides the heartbeats.
struct view_inputs {
  messages::cluster_snapshot snapshot;
  messages::node_metrics own;  ///< the coordinator's process
  run_facts run;
  int64_t now_ms = 0;
};

/// The views of the cluster.
class cluster_view {
 public:
  explicit cluster_view(stuck_options opts = {}) : opts_(opts) {}

  /// A heartbeat's metrics from `node_id`.
  void on_metrics(const std::string& node_id, messages::node_metrics m);

  /// Runs the detector over the episodes in flight; returns the flags not seen before.
  std::vector<stuck_flag> check_stuck(const view_inputs& in);

  /// The JSON of view `what` (nodes, actors, episodes, gpu, queues, train, run, metrics);
  /// episode and prometheus are not JSON views of this class ({"error": ...}: the coordinator
  /// answers them, with a rollout node's transcript and prometheus() below).
  nlohmann::json render(messages::view_kind what, const view_inputs& in) const;

  /// Prometheus text exposition format (version 0.0.4).
  std::string prometheus(const view_inputs& in) const;

  /// Stuck flags counted so far, by reason (each episode once per reason).
  const std::map<std::string, int64_t>& stuck_counts() const { return stuck_counts_; }

 private:
  std::vector<const messages::node_metrics*> live(const view_inputs& in) const;
  std::vector<messages::episode_progress> episodes(const view_inputs& in) const;
  nlohmann::json nodes(const view_inputs& in) const;
  nlohmann::json actors(const view_inputs& in) const;
  nlohmann::json episode_view(const view_inputs& in) const;
  nlohmann::json gpu(const view_inputs& in) const;
  nlohmann::json queues(const view_inputs& in) const;
  nlohmann::json run(const view_inputs& in) const;

  stuck_options opts_;
  std::map<std::string, messages::node_metrics> by_process_;
  std::map<std::string, std::string> process_of_;   // node id -> process
  std::map<uint64_t, std::set<std::string>> seen_;  // episode -> reasons flagged
  std::map<std::string, int64_t> stuck_counts_;
  std::vector<stuck_flag> current_;
};

}  // namespace caf_agent::observe
