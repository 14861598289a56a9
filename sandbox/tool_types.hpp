#pragma once
/// @file tool_types.hpp
/// The agent-facing call and result types of the sandbox tools.

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "messages/enums.hpp"

namespace caf_agent::sandbox {

/// One tool invocation requested by the policy.
struct tool_call {
  /// Identifier of the call, echoed in the result (OpenAI `tool_call_id`).
  std::string id;
  /// Tool name, e.g. "Bash" or "Read".
  std::string name;
  /// Arguments object as produced by the policy; validated by the tool.
  nlohmann::json arguments;
};

/// Outcome class of a tool call; says whether a retry can help (the protocol's enum,
/// messages/enums.hpp: ok, error, timeout, killed, internal; `to_string` names it).
using messages::tool_status;

/// The observation returned to the policy for one `tool_call`.
struct tool_result {
  /// The `tool_call::id` this result answers.
  std::string call_id;
  /// Text shown to the agent (already truncated to the configured cap).
  std::string output;
  /// Outcome class.
  tool_status status = tool_status::ok;
  /// Wall-clock time spent in the tool, milliseconds.
  double elapsed_ms = 0.0;
  /// Exit code of a shell command; 0 for file tools, -1 when no process finished.
  int exit_code = 0;
};

/// Serialises a result as a JSON object (for logs and trajectories).
nlohmann::json to_json(const tool_result& result);

}  // namespace caf_agent::sandbox
