#pragma once
/// actors/log.hpp: one-line, thread-safe event log on stderr.
///
/// Lines look like `12:00:01.234 coordinator: node rollout@h:42 registered`.
/// Tests read these lines, so their wording is part of the interface.

#include <string_view>

namespace caf_agent {

/// Verbosity of the process-wide log.
enum class log_level { quiet = 0, info = 1, debug = 2 };

/// Sets the process-wide level (default info).
void set_log_level(log_level level);

/// Writes one line at info level: "<time> <component>: <message>".
void log_info(std::string_view component, std::string_view message);

/// Writes one line at debug level.
void log_debug(std::string_view component, std::string_view message);

/// Writes one line regardless of level (errors and warnings).
void log_error(std::string_view component, std::string_view message);

/// Milliseconds since the unix epoch (wall clock, for records and heartbeats).
long long unix_ms();

}  // namespace caf_agent
