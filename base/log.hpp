#pragma once
/// base/log.hpp: one-line, thread-safe event log on stderr (header-only; every layer may use it).
///
/// Lines look like `12:00:01.234 coordinator: node rollout@h:42 registered`.
/// Tests read these lines, so their wording is part of the interface.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <string_view>

namespace caf_agent {

/// Verbosity of the process-wide log.
enum class log_level { quiet = 0, info = 1, debug = 2 };

namespace log_detail {

inline std::atomic<int> current_level{static_cast<int>(log_level::info)};
inline std::mutex mutex;

inline void write_line(std::string_view component, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  localtime_r(&secs, &tm);
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  std::string line = std::string{stamp} + " " + std::string{component} + ": " + std::string{message} + "\n";
  std::lock_guard<std::mutex> guard{mutex};
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace log_detail

/// Sets the process-wide level (default info).
inline void set_log_level(log_level level) {
  log_detail::current_level = static_cast<int>(level);
}

/// Writes one line at info level: "<time> <component>: <message>".
inline void log_info(std::string_view component, std::string_view message) {
  if (log_detail::current_level >= static_cast<int>(log_level::info)) log_detail::write_line(component, message);
}

/// Writes one line at debug level.
inline void log_debug(std::string_view component, std::string_view message) {
  if (log_detail::current_level >= static_cast<int>(log_level::debug)) log_detail::write_line(component, message);
}

/// Writes one line regardless of level (errors and warnings).
inline void log_error(std::string_view component, std::string_view message) {
  log_detail::write_line(component, message);
}

/// Milliseconds since the unix epoch (wall clock, for records and heartbeats).
inline long long unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

/// Microseconds on the steady clock (durations: time queued, on a slot, in a build).
inline int64_t steady_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace caf_agent
