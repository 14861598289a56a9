#pragma once
/// rollout/eval_report.hpp: the evaluation-mode report over trajectory records.

#include <map>
#include <string>
#include <vector>

#include "messages/trajectory.hpp"

namespace caf_agent::rollout {

/// Aggregates of one group of episodes (a level, or all).
struct eval_group {
  int episodes = 0;
  int aborted = 0;                   ///< infrastructure failures: excluded from the rates
  int correct = 0;                   ///< reward >= 1
  int faster_eager = 0;              ///< reward >= 2
  int faster_compile = 0;            ///< reward == 3
  double geomean_speedup_eager = 0;  ///< over correct episodes with timings
  double geomean_speedup_compile = 0;
  double mean_turns = 0;
};

/// The whole report: per level and overall.
struct eval_report {
  std::map<int, eval_group> by_level;
  eval_group overall;
  std::map<std::string, int> terminations;
};

/// Builds the report; `level_of` maps task id -> level (unknown tasks: level 0).
eval_report make_eval_report(const std::vector<messages::trajectory_record>& records,
                             const std::map<std::string, int>& level_of);

/// Human-readable table of the report.
std::string format_eval_report(const eval_report& report);

}  // namespace caf_agent::rollout
