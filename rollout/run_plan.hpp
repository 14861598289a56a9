#pragma once
/// rollout/run_plan.hpp: a run's plan, kept in its directory so the run can resume.
///
/// `plan.json` beside the trajectory segments names every planned episode (id, task,
/// seed) and the settings they run with. The store's records are the progress: a
/// resumed run (`caf-agent --role coordinator --resume DIR`) runs exactly the planned
/// episodes that have no record. The plan is written once, atomically (a temporary
/// name, fsync, rename, fsync of the directory), so a crash leaves the old plan or the
/// new one, never half of one.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "messages/enums.hpp"

namespace caf_agent::rollout {

/// On-disk format version of plan.json; bump on any field change.
inline constexpr uint32_t run_plan_format_version = 1;

/// One planned episode.
struct planned_episode {
  uint64_t episode_id = 0;
  std::string task_id;
  uint64_t seed = 0;
};

/// A run's plan.
struct run_plan {
  uint32_t format_version = run_plan_format_version;
  messages::episode_mode mode = messages::episode_mode::eval;
  int32_t max_turns = 0;
  int64_t wall_limit_ms = 0;
  std::string tasks_dir;  ///< where the tasks were loaded from (absolute)
  std::vector<planned_episode> episodes;
};

/// The plan's file name inside a run directory.
inline constexpr const char* run_plan_file = "plan.json";

/// Writes `plan` to `dir`/plan.json atomically; returns an error message on failure.
std::optional<std::string> write_run_plan(const std::filesystem::path& dir, const run_plan& plan);

/// Reads `dir`/plan.json; returns an error message (naming the file) on failure.
std::optional<std::string> read_run_plan(const std::filesystem::path& dir, run_plan& out);

/// Writes `text` to `path` atomically (temporary name in the same directory, fsync,
/// rename, fsync of the directory); returns an error message on failure.
std::optional<std::string> write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace caf_agent::rollout
