#pragma once
/// messages/policy.hpp: asking a policy backend for the next assistant turn.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/fields.hpp"

namespace caf_agent::messages {

/// Sampling settings of one request.
struct sampling_params {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;  ///< 0 = off
  int32_t max_new_tokens = 2048;
  std::vector<std::string> stop;
  uint64_t seed = 0;
  CAF_AGENT_FIELDS(sampling_params, temperature, top_p, top_k, max_new_tokens, stop, seed)
};

/// Episode -> policy: continue this token sequence.
struct generate_request {
  uint64_t episode_id = 0;
  uint64_t request_id = 0;
  std::string task_id;  ///< lets replay backends pick the recorded episode
  int32_t turn = 0;
  std::vector<int32_t> prompt_tokens;  ///< the whole conversation so far
  std::string prompt_text;             ///< for text-level backends that take a rendered prompt
  /// For chat backends (openai): the conversation as a JSON array of
  /// {role, content, tool_calls: [{id, name, arguments}], tool_call_id}.
  std::string messages_json;
  sampling_params sampling;
  CAF_AGENT_FIELDS(generate_request, episode_id, request_id, task_id, turn, prompt_tokens, prompt_text, messages_json,
                   sampling)
};

/// Policy -> episode: the sampled assistant turn.
struct completion {
  uint64_t request_id = 0;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  ///< sampler logprob per token in `tokens`
  std::string text;
  completion_finish finish_reason = completion_finish::stop;
  std::string error;  ///< set when finish_reason is error
  uint64_t policy_version = 0;
  int64_t latency_us = 0;
  CAF_AGENT_FIELDS(completion, request_id, tokens, logprobs, text, finish_reason, error, policy_version, latency_us)
};

}  // namespace caf_agent::messages
