#pragma once
/// @file bwrap.hpp
/// The bubblewrap command line of one sandboxed command, and a usability probe.

#include "sandbox/config.hpp"
#include "sandbox/process_runner.hpp"

#include <string>
#include <vector>

namespace caf_agent::sandbox {

/// Builds the spawn spec for `bash -c command` in the episode's sandbox.
/// `host_workspace` is the real host path; `uid` the host uid to run as (-1: keep ours).
spawn_spec sandboxed_bash(const sandbox_config& cfg, const std::string& host_workspace, const std::string& command,
                          int uid);

/// The bwrap arguments before `--` (namespaces, mounts, identity); exposed for tests.
std::vector<std::string> bwrap_args(const sandbox_config& cfg, const std::string& host_workspace);

/// Runs `true` in a minimal sandbox as `uid`; returns "" when bwrap works, else a message
/// naming the cause (missing binary, user namespaces disabled, ...). Successes are cached.
std::string probe_bwrap(const sandbox_config& cfg, const std::string& host_workspace, int uid);

}  // namespace caf_agent::sandbox
