// observe/stuck.cpp: see stuck.hpp.
#include "observe/stuck.hpp"

namespace caf_agent::observe {

namespace {

std::string seconds(int64_t ms) {
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}

}  // namespace

std::vector<stuck_flag> detect_stuck(const std::vector<messages::episode_progress>& episodes, int64_t now_ms,
                                     double median_turn_ms, int64_t turn_samples, const stuck_options& opts) {
  std::vector<stuck_flag> out;
  for (auto& e : episodes) {
    const auto idle = now_ms - e.last_progress_ms;
    if (e.last_progress_ms > 0 && idle >= opts.no_progress_ms)
      out.push_back(
          {e.episode_id, e.node_id, "no_progress", "no progress for " + seconds(idle) + " (" + e.phase + ")"});
    if (opts.repeat_calls > 0 && e.repeats >= opts.repeat_calls)
      out.push_back({e.episode_id, e.node_id, "repeated_call",
                     "the same call " + std::to_string(e.repeats) + " times in a row: " + e.last_call});
    const auto turn_ms = now_ms - e.turn_started_ms;
    if (e.turn_started_ms > 0 && median_turn_ms > 0 && turn_samples >= opts.min_turn_samples &&
        turn_ms >= opts.min_turn_ms && static_cast<double>(turn_ms) > opts.turn_factor * median_turn_ms)
      out.push_back({e.episode_id, e.node_id, "slow_turn",
                     "turn " + std::to_string(e.turn) + " has run " + seconds(turn_ms) + ", median " +
                         seconds(static_cast<int64_t>(median_turn_ms))});
  }
  return out;
}

}  // namespace caf_agent::observe
