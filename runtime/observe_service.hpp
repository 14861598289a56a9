#pragma once
/// runtime/observe_service.hpp: the coordinator's Prometheus endpoint and metrics JSONL.
///
/// `start_metrics_endpoint` serves GET /metrics (Prometheus text, from the
/// coordinator's "prometheus" view) on [observe] prometheus_host:prometheus_port;
/// it lives as long as the coordinator actor. `metrics_log` appends the "metrics" view
/// as one JSON line to RUN_DIR/metrics.jsonl every [observe] metrics_interval_ms, and a
/// last line when it stops; `caf-agent report` plots from it.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "observe/stuck.hpp"
#include "runtime/config.hpp"

namespace caf_agent::runtime {

/// The stuck-episode thresholds of the config.
observe::stuck_options stuck_options_of(const observe_config& cfg);

/// Starts the endpoint when configured (prometheus_port >= 0); a port it cannot bind
/// is logged, not fatal (the coordinator matters more than its metrics).
void start_metrics_endpoint(caf::actor_system& sys, caf::actor coordinator, const observe_config& cfg);

/// Appends the coordinator's metrics to `dir`/metrics.jsonl while it lives.
class metrics_log {
 public:
  metrics_log(caf::actor_system& sys, caf::actor coordinator, std::string dir, int64_t interval_ms);
  ~metrics_log();
  metrics_log(const metrics_log&) = delete;
  metrics_log& operator=(const metrics_log&) = delete;

 private:
  void write_line();
  caf::actor_system& sys_;
  caf::actor coordinator_;
  std::string path_;
  int64_t interval_ms_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

/// The name of the metrics file in a run directory.
inline constexpr const char* metrics_file = "metrics.jsonl";

}  // namespace caf_agent::runtime
