#pragma once
// The commands of policy_text_tool, as a library function so that tests can
// call them without spawning a process.

#include <string>
#include <vector>

#include "policy/text/result.hpp"

namespace caf_agent::policy {

/// Runs one policy_text_tool command (args[0] is the command name) and
/// returns the JSON text it prints.
result<std::string> run_text_command(const std::vector<std::string>& args);

}  // namespace caf_agent::policy
