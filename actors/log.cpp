// actors/log.cpp: see log.hpp.
#include "actors/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace caf_agent {

namespace {

std::atomic<int> current_level{static_cast<int>(log_level::info)};
std::mutex log_mutex;

void write_line(std::string_view component, std::string_view message) {
  auto now = std::chrono::system_clock::now();
  auto secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  localtime_r(&secs, &tm);
  char stamp[32];
  std::snprintf(stamp, sizeof stamp, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms.count()));
  std::string line = std::string{stamp} + " " + std::string{component} + ": " +
                     std::string{message} + "\n";
  std::lock_guard<std::mutex> guard{log_mutex};
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void set_log_level(log_level level) {
  current_level = static_cast<int>(level);
}

void log_info(std::string_view component, std::string_view message) {
  if (current_level >= static_cast<int>(log_level::info)) write_line(component, message);
}

void log_debug(std::string_view component, std::string_view message) {
  if (current_level >= static_cast<int>(log_level::debug)) write_line(component, message);
}

void log_error(std::string_view component, std::string_view message) {
  write_line(component, message);
}

long long unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace caf_agent
