#pragma once
/// @file metrics.hpp
/// Per-tool counters and latency histograms; thread-safe, exportable as JSON.

#include "sandbox/tool_types.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace caf_agent::sandbox {

/// Counters of one tool.
struct tool_counters {
  /// Upper bounds (ms) of the latency buckets; the last bucket is open-ended.
  /// Rationale: log-spaced from 0.1 ms (in-process tools) to 10 min (the max Bash timeout).
  static constexpr std::array<double, 16> kBoundsMs = {0.1, 0.3,  1,    3,     10,    20,    50,     100,
                                                       300, 1000, 3000, 10000, 30000, 60000, 120000, 600000};
  /// Calls made.
  std::uint64_t calls = 0;
  /// Calls that ended in `error`.
  std::uint64_t errors = 0;
  /// Calls that ended in `timeout`.
  std::uint64_t timeouts = 0;
  /// Calls that ended in `killed`.
  std::uint64_t killed = 0;
  /// Calls that ended in `internal`.
  std::uint64_t internal = 0;
  /// Sum of latencies, ms.
  double total_ms = 0.0;
  /// Largest latency, ms.
  double max_ms = 0.0;
  /// Histogram counts; index i counts latencies <= kBoundsMs[i], the last slot the rest.
  std::array<std::uint64_t, kBoundsMs.size() + 1> buckets{};
  /// Upper bound of the bucket holding quantile `q` (0..1), ms.
  double quantile_ms(double q) const;
};

/// Metrics of all tools of one executor (or many: it is thread-safe).
class tool_metrics {
 public:
  /// Records one finished call.
  void record(const std::string& tool, tool_status status, double elapsed_ms);
  /// A copy of one tool's counters (zeros if never called).
  tool_counters get(const std::string& tool) const;
  /// Adds all counters of `other` into this.
  void merge(const tool_metrics& other);
  /// {"Bash": {"calls":..,"errors":..,"timeouts":..,"p50_ms":..,...}, ...}
  nlohmann::json to_json() const;

 private:
  mutable std::mutex m_;
  std::map<std::string, tool_counters> by_tool_;
};

}  // namespace caf_agent::sandbox
