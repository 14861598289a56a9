#pragma once
/// messages/tools.hpp: tool calls of an episode and their observations.

#include <cstdint>
#include <string>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Episode -> tool executor: run one tool call in the episode's sandbox.
struct tool_request {
  uint64_t episode_id = 0;
  std::string call_id;
  std::string name;            ///< Bash, Read, Write, Edit, MultiEdit, Glob, Grep, TodoWrite, ...
  std::string arguments_json;  ///< the call's arguments object, as JSON text
  CAF_AGENT_FIELDS(tool_request, episode_id, call_id, name, arguments_json)
};

/// Tool executor -> episode: the observation.
struct tool_response {
  std::string call_id;
  std::string output;  ///< what the agent sees (already truncated)
  tool_status status = tool_status::ok;
  int32_t exit_code = 0;
  double elapsed_ms = 0;
  CAF_AGENT_FIELDS(tool_response, call_id, output, status, exit_code, elapsed_ms)
};

}  // namespace caf_agent::messages
