#pragma once
/// messages/trajectory.hpp: the one record every started episode ends in.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// On-disk format version of trajectory_record; bump on any field change.
inline constexpr uint32_t trajectory_format_version = 1;

/// Per-tool call statistics of an episode.
struct tool_stats {
  int32_t calls = 0;
  int32_t errors = 0;
  int32_t timeouts = 0;
  double total_ms = 0;
  CAF_AGENT_FIELDS(tool_stats, calls, errors, timeouts, total_ms)
};

/// One episode, as the learner consumes it.
struct trajectory_record {
  uint32_t format_version = trajectory_format_version;
  uint64_t episode_id = 0;
  int32_t attempt = 0;
  std::string task_id;
  episode_mode mode = episode_mode::train;
  std::string node_id;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;            ///< sampler logprob per token (0 for non-sampled)
  std::vector<uint8_t> loss_mask;         ///< 1 for assistant-sampled tokens
  std::vector<uint32_t> turn_starts;      ///< token index where each assistant turn starts
  std::vector<std::string> turn_texts;    ///< assistant text per turn (for text backends)
  std::vector<std::string> observations;  ///< tool observations in order (as the agent saw them)
  std::map<std::string, tool_stats> tools;
  int32_t malformed_tool_calls = 0;
  int32_t reward = 0;
  bool correct = false;
  double speedup_eager = 0;
  double speedup_compile = 0;
  std::string verdict;                             ///< the final evaluation's reason text
  episode_end termination = episode_end::aborted;  ///< set by the episode (aborted until then)
  std::string abort_reason;
  std::vector<uint64_t> policy_versions;
  std::map<std::string, double> timings_ms;  ///< policy, tools, eval, total
  int32_t turns = 0;
  int64_t started_at_ms = 0;
  int64_t ended_at_ms = 0;
  std::vector<uint32_t> turn_overhead_us;  ///< orchestration time per turn, excluding waits
  CAF_AGENT_FIELDS(trajectory_record, format_version, episode_id, attempt, task_id, mode, node_id, tokens, logprobs,
                   loss_mask, turn_starts, turn_texts, observations, tools, malformed_tool_calls, reward, correct,
                   speedup_eager, speedup_compile, verdict, termination, abort_reason, policy_versions, timings_ms,
                   turns, started_at_ms, ended_at_ms, turn_overhead_us)
};

}  // namespace caf_agent::messages
