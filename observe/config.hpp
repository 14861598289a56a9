#pragma once
/// observe/config.hpp: [observe], metrics, the Prometheus endpoint and the stuck-episode rules of
/// the coordinator (defaults, the field list that runtime/ reads TOML through and prints
/// config/defaults.toml from, checks).

#include <cstdint>
#include <string>

#include "base/config_fields.hpp"

namespace caf_agent::observe {

/// The stuck-episode detector's default thresholds (the one place; observe::stuck_options uses them).
// Rationale: a healthy turn waits at most for one generation (minutes at 32k tokens) plus one
// evaluation (the judge's deadline, 5 min); 10 minutes without either is stuck.
inline constexpr int64_t default_stuck_no_progress_s = 600;
// Rationale: the RFT filter calls more than 3 identical calls a loop; 5 leaves room.
inline constexpr int32_t default_stuck_repeat_calls = 5;
// Rationale: turn times are long-tailed; 10x the median is far out of the tail.
inline constexpr double default_stuck_turn_factor = 10.0;
// Rationale: when turns take milliseconds (sim), 10x the median is noise; a turn must also be
// long in absolute terms.
inline constexpr int64_t default_stuck_min_turn_s = 30;

/// [observe]: what each member means is said once, in fields().
struct observe_config {
  bool instrument = true;
  std::string prometheus_host = "127.0.0.1";
  int32_t prometheus_port = -1;
  int64_t metrics_interval_ms = 5000;
  int64_t stuck_no_progress_s = default_stuck_no_progress_s;
  int32_t stuck_repeat_calls = default_stuck_repeat_calls;
  double stuck_turn_factor = default_stuck_turn_factor;
  int64_t stuck_min_turn_s = default_stuck_min_turn_s;

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("instrument", c.instrument, "count messages per actor kind (caf.actor.* metrics); off only to measure its cost");
    f("prometheus_host", c.prometheus_host, "the coordinator's Prometheus endpoint (GET /metrics)", not_empty());
    f("prometheus_port", c.prometheus_port, "-1 = off, 0 = any free port",
      within(-1, 65535, "must be -1 (off) or in 0..65535"));
    f("metrics_interval_ms", c.metrics_interval_ms,
      "one line of RUN_DIR/metrics.jsonl this often (0 = none); caf-agent report plots it");
    f("stuck_no_progress_s", c.stuck_no_progress_s,
      "an episode without a completion or tool result this long is flagged stuck", positive());
    f("stuck_repeat_calls", c.stuck_repeat_calls, "... or repeating one tool call this many times in a row",
      at_least(2, "must be >= 2 (one call is no repetition)"));
    f("stuck_turn_factor", c.stuck_turn_factor, "... or in a turn this many times the median turn",
      above(1, "must be > 1"));
    f("stuck_min_turn_s", c.stuck_min_turn_s, "... that has also run at least this long", at_least(0, "must be >= 0"));
  }

  /// Rules the field list cannot say.
  void validate(base::config_errors& e) const {
    // Rationale: below 100 ms the JSONL grows faster than anyone reads it; 0 turns it off.
    if (metrics_interval_ms != 0 && metrics_interval_ms < 100)
      e.error("metrics_interval_ms", "must be 0 (off) or >= 100");
  }
};

}  // namespace caf_agent::observe
