#pragma once
/// actors/tool_executor.hpp: the node's tool executors.
///
/// A router actor owns the episodes' sandboxes and a queue; N detached executor
/// actors run the blocking tool calls (bubblewrap, file tools). The queue is
/// bounded by the node's episodes (each has at most one call outstanding, and
/// the rollout manager admits at most max_concurrent_episodes); a call that finds
/// every executor busy waits for one: back-pressure, not an error.
///
/// Protocol (to the router: `tool_router_actor`, typed, so a message outside it is a
/// compile error):
///   (atoms::open, uint64 episode, task_spec)  -> std::string   ("" or the error)
///   tool_request                               -> tool_response
///   (atoms::close, uint64 episode)             -> bool
///   (atoms::lookup, uint64 episode)            -> (std::string error, std::map files): the submission
///   (atoms::stats)                             -> std::map<std::string, double>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "base/named_enum.hpp"
#include "messages/episode.hpp"
#include "messages/tools.hpp"
#include "messages/type_ids.hpp"
#include "sandbox/settings.hpp"

namespace caf_agent {

/// The tool router's protocol (see the file comment).
using tool_router_actor =
    caf::typed_actor<caf::replies_to<atoms::open, uint64_t, messages::task_spec>::with<std::string>,
                     caf::replies_to<messages::tool_request>::with<messages::tool_response>,
                     caf::replies_to<atoms::close, uint64_t>::with<bool>,
                     caf::replies_to<atoms::lookup, uint64_t>::with<std::string, std::map<std::string, std::string>>,
                     caf::replies_to<atoms::stats>::with<std::map<std::string, double>>>;

/// What the tool executors run: the real tools in per-episode sandboxes, or simulated latency
/// (the sim policy's load tests: no sandbox, no tool runs).
enum class tool_mode : uint8_t { sandbox, sim };
CAF_AGENT_ENUM_NAMES(tool_mode, "sandbox", "sim")

/// Settings of a node's tool executors.
struct tool_executor_options {
  int executors = 2;
  tool_mode mode = tool_mode::sandbox;
  double sim_latency_ms = 50;
  // sandbox mode:
  sandbox::sandbox_settings sandbox;        ///< [sandbox]: workspaces made under its workspace_root
  std::string template_dir;                 ///< skills/workspace
  std::string harness_dir;                  ///< skills/eval_worker/caf_agent_eval
  std::vector<std::string> extra_ro_binds;  ///< e.g. the venv, readable inside the sandbox
  std::string path_env;                     ///< PATH inside the sandbox
};

/// Spawns the router and its executors; returns the router.
tool_router_actor spawn_tool_executors(caf::actor_system& sys, tool_executor_options opts);

}  // namespace caf_agent
