#pragma once
// serving/chat_types.hpp: one chat completion as plain structs, the same on both sides of the
// HTTP connection: the server fills a chat_request from OpenAI JSON and answers a chat_response;
// the client does the reverse. The RL fields (token ids, sampler logprobs, policy version)
// travel as extension fields so the learner sees exactly the tokens the sampler drew.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/text/chat_format.hpp"
#include "policy/text/json.hpp"

namespace caf_agent::serving {

/// A chat message plus the OpenAI ids that the Qwen chat format does not render.
/// Built from a policy message with `chat_message{policy_message}`.
struct chat_message : policy::chat_message {
  /// Role "tool": the id of the assistant tool call this message answers. The client fills an
  /// empty one from the preceding assistant message's calls, in order.
  std::string tool_call_id;
  /// Role "assistant": one id per entry of tool_calls (may be shorter or empty: the client
  /// generates the missing ones, as OpenAI-compatible servers require them).
  std::vector<std::string> tool_call_ids;
};

/// A chat completion request (the OpenAI fields this project uses).
struct chat_request {
  /// The model name; the client sends its configured name when empty.
  std::string model;
  /// The conversation: roles "system", "user", "assistant", "tool".
  std::vector<chat_message> messages;
  /// Tool definitions as OpenAI writes them ({"type": "function", "function": {...}}).
  policy::json_array tools;
  /// Softmax temperature; 0 is greedy.
  float temperature = 1.0f;
  /// Nucleus sampling mass in (0, 1].
  float top_p = 1.0f;
  /// Keep the top_k most likely tokens; 0 keeps all (an extension vLLM and SGLang accept).
  int32_t top_k = 0;
  /// The most tokens to generate.
  int32_t max_tokens = 256;
  /// Generation stops before the first occurrence of any of these strings.
  std::vector<std::string> stop;
  /// Seeds the request's sampler: same seed, same tokens. Absent: the server picks one.
  /// Travels as a 63-bit JSON integer (the top bit is dropped).
  std::optional<uint64_t> seed;
  /// Return per-token logprobs (choices[0].logprobs) in the OpenAI format.
  bool logprobs = false;
};

/// A chat completion: the parsed assistant message plus the exact sampled tokens.
struct chat_response {
  /// The server's id ("chatcmpl-..."); empty inside the server before it answers.
  std::string id;
  /// The model that answered.
  std::string model;
  /// The assistant text outside tool calls (the whole text when a call could not be parsed).
  std::string content;
  /// The parsed tool calls, arguments as JSON (an object, or a string that was not JSON).
  std::vector<policy::tool_call> tool_calls;
  /// One id per tool call ("call_<n>"); the server fills empty ones.
  std::vector<std::string> tool_call_ids;
  /// "stop", "length" or "tool_calls".
  std::string finish_reason;
  /// The assistant body exactly as sampled and decoded, before tool-call parsing (stop token
  /// excluded; a matched stop string included). From a server without this extension field:
  /// rendered from content and tool calls in the Qwen format.
  std::string raw_text;
  /// The prompt's token ids (extension; empty from servers that do not return them).
  std::vector<int32_t> prompt_token_ids;
  /// The sampled token ids, stop token included (extension; empty when not returned).
  std::vector<int32_t> token_ids;
  /// The sampler's logprob per sampled token (when requested or returned).
  std::vector<float> logprobs;
  /// The bytes of each sampled token (may be a partial UTF-8 character).
  std::vector<std::string> token_texts;
  /// The weights version that produced the first sampled token (extension; 0 when unknown).
  uint64_t policy_version = 0;
  /// usage.prompt_tokens.
  int32_t prompt_tokens = 0;
  /// usage.completion_tokens.
  int32_t completion_tokens = 0;
};

}  // namespace caf_agent::serving
