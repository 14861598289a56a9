#pragma once
// device_timeline: what a profile's device events (kernels and copies: start, end, which kernel)
// add to the device's timeline. No torch; policy_model_tool's `bench --profile` reads it.
//
// Rationale: with programmatic dependent launch a kernel starts before the one ahead of it ends,
// and its profiled duration includes that wait, so summed durations overlap (a 1-row 131k step
// summed 2,293 us of kernels in 1,531 us of wall time). What a kernel costs the step is the part
// of its events that no earlier-starting event covers.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace caf_agent::policy {

struct device_event {
  uint64_t start_ns = 0, end_ns = 0;
  size_t kernel = 0;  // an index into the caller's kernels
};

struct device_timeline {
  std::vector<double> added_us;  // per kernel: its events' time that no earlier-starting event covers
  double span_us = 0;            // the sum of added_us: the busy time counted once
  int64_t short_gaps = 0, long_gaps = 0;
  double short_gap_us = 0, long_gap_us = 0, longest_gap_us = 0;
};

/// The timeline of `events` (any order) over `kernels` kernels: each event adds what extends the
/// latest end of the events that started before it (ties by start: the shorter first); a start
/// past that end is a gap, short when under `short_gap_us` (one kernel's launch after another
/// inside a graph) and long otherwise (the host between steps, a synchronisation).
inline device_timeline read_device_timeline(std::vector<device_event> events, size_t kernels,
                                            double short_gap_us = 5.0) {
  device_timeline t;
  t.added_us.assign(kernels, 0.0);
  std::sort(events.begin(), events.end(), [](const device_event& x, const device_event& y) {
    return x.start_ns < y.start_ns || (x.start_ns == y.start_ns && x.end_ns < y.end_ns);
  });
  uint64_t busy_until = events.empty() ? 0 : events.front().start_ns;
  for (const auto& e : events) {
    if (e.start_ns > busy_until) {
      const double gap = static_cast<double>(e.start_ns - busy_until) / 1000.0;
      if (gap < short_gap_us)
        ++t.short_gaps, t.short_gap_us += gap;
      else
        ++t.long_gaps, t.long_gap_us += gap;
      t.longest_gap_us = std::max(t.longest_gap_us, gap);
    }
    const uint64_t from = std::max(e.start_ns, busy_until);
    if (e.end_ns > from && e.kernel < kernels) {
      const double added = static_cast<double>(e.end_ns - from) / 1000.0;
      t.added_us[e.kernel] += added;
      t.span_us += added;
    }
    busy_until = std::max(busy_until, e.end_ns);
  }
  return t;
}

}  // namespace caf_agent::policy
