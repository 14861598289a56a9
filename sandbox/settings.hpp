#pragma once
/// sandbox/settings.hpp: [sandbox], what a node's tool executors give every episode's sandbox
/// (defaults, the field list that runtime/ reads TOML through and prints config/defaults.toml
/// from, checks). The per-episode `sandbox_config` (sandbox/config.hpp) is made from it.

#include <cstdint>
#include <string>

#include "base/config_fields.hpp"
#include "base/named_enum.hpp"

namespace caf_agent::sandbox {

struct sandbox_config;  // sandbox/config.hpp: one episode's sandbox

/// How an episode's tools are isolated ([sandbox] isolation, sandbox_config::isolation):
/// bubblewrap namespaces (required in production), or none (development only: rlimits,
/// process-group kill and workspace confinement of file tools, but no namespaces).
enum class isolation_kind : uint8_t { bwrap, none };
CAF_AGENT_ENUM_NAMES(isolation_kind, "bwrap", "none")

/// A Bash call's timeout when it names none, seconds (the one default; sandbox_config uses it).
// Rationale: Claude-Code-style default of 2 minutes, enough for one kernel build.
inline constexpr int64_t default_bash_timeout_s = 120;
/// Largest observation a tool returns to the agent, bytes (the one default; sandbox_config uses it).
// Rationale: ~30 kB (the usual coding-agent cap) keeps one observation a few thousand tokens.
inline constexpr int64_t default_max_output_bytes = 30000;

/// [sandbox]: what each member means is said once, in fields().
struct sandbox_settings {
  isolation_kind isolation = isolation_kind::bwrap;
  std::string workspace_root = "runs/local/workspaces";
  int64_t bash_timeout_s = default_bash_timeout_s;
  int64_t max_output_bytes = default_max_output_bytes;
  bool keep_workspaces = false;

  /// These settings in one episode's sandbox config: isolation, the Bash timeout, the output
  /// cap, keeping the workspace (workspace_root is where the caller makes the workspace).
  void apply_to(sandbox_config& episode) const;

  /// The field list (base/config_fields.hpp).
  template <class F, class Self>
  static void fields(F& f, Self& c) {
    using namespace base;
    f("isolation", c.isolation, "bwrap, or none (development only: no isolation)");
    f("workspace_root", c.workspace_root, "episode workspaces are made under it", not_empty());
    f("bash_timeout_s", c.bash_timeout_s, "a Bash call that names no timeout ends after this", positive());
    f("max_output_bytes", c.max_output_bytes, "a tool's output is cut to this (head and tail kept)", positive());
    f("keep_workspaces", c.keep_workspaces, "keep each episode's workspace after it ends (debugging)");
  }
  /// Rules between fields: none.
  void validate(base::config_errors&) const {}
};

}  // namespace caf_agent::sandbox
