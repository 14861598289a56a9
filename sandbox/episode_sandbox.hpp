#pragma once
/// @file episode_sandbox.hpp
/// The single entry point of the sandbox library: one object per episode that executes the
/// agent's tool calls (Bash in bubblewrap, file tools in-process but confined), owns the
/// episode's background shells, todo list and metrics, and leaves nothing behind on close.
///
/// Use from one thread at a time; calls block (the actor runs them in detached actors).

#include "sandbox/config.hpp"
#include "sandbox/metrics.hpp"
#include "sandbox/tool_types.hpp"

#include <memory>
#include <string>

namespace caf_agent::sandbox {

class episode_sandbox;

/// Result of `episode_sandbox::create`: a sandbox or the reason there is none.
struct create_result {
  /// The sandbox; null on failure.
  std::unique_ptr<episode_sandbox> sandbox;
  /// Why creation failed (names the config field or the missing capability); empty on success.
  std::string error;
};

/// One episode's sandbox.
class episode_sandbox {
 public:
  /// Validates `cfg`, takes a host uid (when root), prepares the workspace and checks that
  /// bubblewrap works. Never falls back to running unsandboxed.
  static create_result create(sandbox_config cfg);
  /// Kills everything still running and removes the workspace unless `keep_workspace`.
  ~episode_sandbox();
  episode_sandbox(const episode_sandbox&) = delete;
  episode_sandbox& operator=(const episode_sandbox&) = delete;

  /// Executes one tool call; never throws. Unknown tools and bad arguments give `error`.
  tool_result execute(const tool_call& call);
  /// The tool definitions for the policy prompt (OpenAI function-calling format).
  static nlohmann::json tool_schemas();
  /// Ends the episode: kills background shells and every process of the episode's uid,
  /// removes the workspace unless configured to keep it. Idempotent.
  void close();
  /// Per-tool counters of this episode.
  const tool_metrics& metrics() const;
  /// The current TodoWrite list.
  const nlohmann::json& todos() const;
  /// The host uid the episode's processes run as, or -1 when not switching uids.
  int host_uid() const;
  /// The configuration in effect.
  const sandbox_config& config() const;
  /// What bounds this episode as a whole: {"cgroup": "v1"|"v2"|"none: why", "workspace_cap":
  /// bytes or "none: why", "memory_peak_bytes", "memory_limit_hits"}.
  nlohmann::json containment() const;

 private:
  struct state;
  explicit episode_sandbox(std::unique_ptr<state> s);
  std::unique_ptr<state> s_;
};

}  // namespace caf_agent::sandbox
