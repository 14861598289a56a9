#include "sandbox/metrics.hpp"

#include <algorithm>

namespace caf_agent::sandbox {

double tool_counters::quantile_ms(double q) const {
  if (calls == 0) return 0.0;
  const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(calls - 1)) + 1;
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    seen += buckets[i];
    if (seen >= rank) return i < kBoundsMs.size() ? kBoundsMs[i] : max_ms;
  }
  return max_ms;
}

void tool_metrics::record(const std::string& tool, tool_status status, double elapsed_ms) {
  std::lock_guard<std::mutex> lock(m_);
  auto& c = by_tool_[tool];
  ++c.calls;
  c.errors += status == tool_status::error;
  c.timeouts += status == tool_status::timeout;
  c.killed += status == tool_status::killed;
  c.internal += status == tool_status::internal;
  c.total_ms += elapsed_ms;
  c.max_ms = std::max(c.max_ms, elapsed_ms);
  const auto it = std::lower_bound(tool_counters::kBoundsMs.begin(), tool_counters::kBoundsMs.end(), elapsed_ms);
  ++c.buckets[static_cast<std::size_t>(it - tool_counters::kBoundsMs.begin())];
}

tool_counters tool_metrics::get(const std::string& tool) const {
  std::lock_guard<std::mutex> lock(m_);
  auto it = by_tool_.find(tool);
  return it == by_tool_.end() ? tool_counters{} : it->second;
}

void tool_metrics::merge(const tool_metrics& other) {
  if (&other == this) return;
  std::map<std::string, tool_counters> copy;
  {
    std::lock_guard<std::mutex> lock(other.m_);
    copy = other.by_tool_;
  }
  std::lock_guard<std::mutex> lock(m_);
  for (const auto& [name, o] : copy) {
    auto& c = by_tool_[name];
    c.calls += o.calls;
    c.errors += o.errors;
    c.timeouts += o.timeouts;
    c.killed += o.killed;
    c.internal += o.internal;
    c.total_ms += o.total_ms;
    c.max_ms = std::max(c.max_ms, o.max_ms);
    for (std::size_t i = 0; i < c.buckets.size(); ++i) c.buckets[i] += o.buckets[i];
  }
}

nlohmann::json tool_metrics::to_json() const {
  std::lock_guard<std::mutex> lock(m_);
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, c] : by_tool_) {
    j[name] = {{"calls", c.calls},
               {"errors", c.errors},
               {"timeouts", c.timeouts},
               {"killed", c.killed},
               {"internal", c.internal},
               {"mean_ms", c.calls ? c.total_ms / static_cast<double>(c.calls) : 0.0},
               {"max_ms", c.max_ms},
               {"p50_ms", c.quantile_ms(0.5)},
               {"p90_ms", c.quantile_ms(0.9)},
               {"p99_ms", c.quantile_ms(0.99)},
               {"buckets", c.buckets}};
  }
  return j;
}

}  // namespace caf_agent::sandbox
