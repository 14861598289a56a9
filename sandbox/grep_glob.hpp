#pragma once
/// @file grep_glob.hpp
/// The search tools: Glob (file names) and Grep (file contents).

#include "sandbox/config.hpp"
#include "sandbox/tool_args.hpp"
#include "sandbox/workspace_paths.hpp"

namespace caf_agent::sandbox {

/// Glob: files matching `pattern` under `path` (default: workspace), newest first.
tool_outcome glob_tool(const workspace_paths& ws, const sandbox_config& cfg, const nlohmann::json& args);

/// Grep: POSIX extended regex search (with \d, \w, \s) over files under `path`;
/// output_mode content | files_with_matches (default) | count; -i, -n, -A, -B, -C, glob, type.
tool_outcome grep_tool(const workspace_paths& ws, const sandbox_config& cfg, const nlohmann::json& args);

/// Rationale: walking more than 200k directory entries means a dependency tree or data dump,
/// not source; stop there so one search stays well under a second.
inline constexpr std::size_t kMaxWalkEntries = 200000;

/// Rationale: a result list longer than 100 paths is not useful to read; narrow the pattern.
inline constexpr std::size_t kMaxGlobResults = 100;

}  // namespace caf_agent::sandbox
