#pragma once
/// rollout/baseline_report.hpp: a task set's eager and torch.compile baselines as the judge
/// measured them (baseline jobs, eval_mode::baseline), per level.

#include <map>
#include <string>
#include <vector>

#include "messages/episode.hpp"
#include "messages/eval.hpp"

namespace caf_agent::rollout {

/// One task's baseline job and what the pool answered.
struct baseline_row {
  messages::task_spec task;      ///< model_py is not kept in reports
  messages::eval_result result;  ///< status, reason, eager_ms, compile_ms, slot, run_us
  bool answered = false;         ///< false: the run stopped before the pool answered
};

/// Aggregates of one level (or all).
struct baseline_group {
  int tasks = 0;
  int eager_measured = 0;
  int compile_measured = 0;
  int compile_failed = 0;                   ///< eager measured, torch.compile failed
  std::map<std::string, int> not_measured;  ///< by status (task_error, infra_error, ...)
  double eager_ms_median = 0, eager_ms_geomean = 0, compile_ms_median = 0;
  double eager_over_compile_geomean = 0;  ///< > 1: torch.compile faster
  int compile_faster = 0;                 ///< more than 5% faster than eager
  int compile_slower = 0;                 ///< more than 5% slower
};

/// The report: per level and overall, and the device the judge recorded.
struct baseline_report {
  std::map<int, baseline_group> by_level;
  baseline_group overall;
  std::string device;  ///< from the judge's answer ("baseline on <device> (torch <v>): ...")
};

/// Aggregates the rows (a time of 0 or NaN counts as not measured).
baseline_report make_baseline_report(const std::vector<baseline_row>& rows);

/// The per-level table, then every task without both times, with the reason.
std::string format_baseline_report(const baseline_report& report, const std::vector<baseline_row>& rows);

/// The rows and the report as JSON (no sources).
std::string baseline_report_json(const baseline_report& report, const std::vector<baseline_row>& rows);

}  // namespace caf_agent::rollout
