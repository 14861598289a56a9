#pragma once
/// observe/stuck.hpp: which episodes in flight look stuck, and why.
///
/// Three signs, each with its own threshold (config [observe]):
///   no_progress   no completion and no tool or evaluation result for `no_progress_ms`;
///   repeated_call the same tool call (name and arguments) `repeat_calls` times in a row;
///   slow_turn     the current turn has run `turn_factor` times the median turn of the
///                 cluster, once `min_turn_samples` turns have finished, and at least
///                 `min_turn_ms`.
/// A flagged episode keeps running: this is for operators, never a verdict.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/cluster.hpp"
#include "observe/config.hpp"

namespace caf_agent::observe {

/// Thresholds of the stuck-episode detector (defaults and their rationale: observe/config.hpp).
struct stuck_options {
  int64_t no_progress_ms = default_stuck_no_progress_s * 1000;
  int32_t repeat_calls = default_stuck_repeat_calls;
  double turn_factor = default_stuck_turn_factor;
  int64_t min_turn_samples = 20;  ///< no median before this many turns ended
  int64_t min_turn_ms = default_stuck_min_turn_s * 1000;
};

/// One reason an episode looks stuck.
struct stuck_flag {
  uint64_t episode_id = 0;
  std::string node_id;
  std::string reason;  ///< no_progress, repeated_call, slow_turn
  std::string detail;  ///< for humans: "no progress for 612 s", ...
};

/// The flags of every episode in `episodes` at `now_ms`; `median_turn_ms` < 0: unknown.
std::vector<stuck_flag> detect_stuck(const std::vector<messages::episode_progress>& episodes, int64_t now_ms,
                                     double median_turn_ms, int64_t turn_samples, const stuck_options& opts);

}  // namespace caf_agent::observe
