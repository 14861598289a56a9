#pragma once
/// runtime/node.hpp: running one `caf-agent` process in its role.

#include "runtime/config.hpp"
#include "runtime/options.hpp"

namespace caf_agent::runtime {

/// Runs the role given on the command line; returns the process exit code.
int run_node(const cli_options& opts, const app_config& cfg);

/// `--role inspector`: prints the coordinator's cluster view.
int run_inspector(const cli_options& opts, const app_config& cfg);

/// Splits "HOST:PORT"; returns false (and a message) when malformed.
bool split_host_port(const std::string& text, std::string& host, uint16_t& port, std::string& error);

}  // namespace caf_agent::runtime
