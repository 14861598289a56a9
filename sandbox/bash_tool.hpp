#pragma once
/// @file bash_tool.hpp
/// The Bash tool: one `bash -c` per call inside the episode's sandbox.

#include "sandbox/background_shells.hpp"
#include "sandbox/config.hpp"
#include "sandbox/tool_args.hpp"

namespace caf_agent::sandbox {

/// Runs `command` (foreground with a timeout, or as a background shell) as `who` (host uid,
/// cgroups) in the workspace `host_workspace`.
tool_outcome bash_tool(const sandbox_config& cfg, const std::string& host_workspace, const spawn_identity& who,
                       background_shells& shells, const nlohmann::json& args);

struct run_result;

/// Turns a finished foreground run into the observation and status the agent sees.
tool_outcome format_bash_result(const run_result& r, double timeout_s, std::size_t cap);

}  // namespace caf_agent::sandbox
