#pragma once
/// observe/report.hpp: `caf-agent report RUN_DIR`, the run as one offline HTML file.
///
/// Reads the run directory's trajectory records (rollout/trajectory_store), its
/// metrics.jsonl (the coordinator's periodic view) and, when present, learner.jsonl
/// (one JSON object per training step; every numeric field is plotted against `step`).
/// Plots are inline SVG drawn by observe/svg_plot: reward and tier distribution over
/// the run, pass and faster rates, turns and tokens per episode, GPU slot utilization
/// over time, learner diagnostics; tables of terminations and stuck episodes.

#include <filesystem>
#include <optional>
#include <string>

namespace caf_agent::observe {

/// The report's HTML, or nullopt with `error` (the directory holds no run).
std::optional<std::string> make_run_report(const std::filesystem::path& run_dir, std::string& error);

/// Writes the report to `out`; returns an error message or "".
std::string write_run_report(const std::filesystem::path& run_dir, const std::filesystem::path& out);

}  // namespace caf_agent::observe
