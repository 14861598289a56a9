#pragma once
/// rollout/conversation.hpp: one episode's ReAct transcript, without actors.
///
/// The episode actor drives it: prompt -> assistant text -> parsed actions ->
/// observations -> next prompt. It decides what each tool call becomes (a sandbox
/// call, or an evaluation for the workspace's `verify` / `profile` commands),
/// truncates observations, counts malformed calls and tracks the context size.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "policy/text/chat_format.hpp"
#include "policy/text/json.hpp"

namespace caf_agent::rollout {

/// What one parsed tool call asks for.
struct action {
  enum kind_t { tool, eval, invalid } kind = tool;
  std::string call_id;
  std::string name;            ///< tool name (tool) or "verify"/"profile" (eval)
  std::string arguments_json;  ///< tool arguments as JSON text
  std::string error;           ///< invalid: the observation text for the agent
};

/// Limits of one episode.
struct conversation_limits {
  int64_t context_limit_tokens = 131072;
  int64_t observation_limit_bytes = 16384;
};

/// An episode's transcript.
class conversation {
 public:
  /// `system_text` is SKILL.md (and anything else the agent must know);
  /// `task_text` the user message; `tools` the tool schemas.
  conversation(std::string system_text, std::string task_text, policy::json_array tools,
               conversation_limits limits);

  /// Adds the assistant's turn and returns the actions its tool calls ask for.
  /// No actions means the agent gave its final answer.
  std::vector<action> on_assistant(const std::string& text);

  /// Adds a tool observation (truncated to the limit) for the call `call_id`.
  void add_observation(const std::string& call_id, const std::string& output);

  /// The whole conversation in the chat format, ending with the generation prompt.
  std::string prompt_text() const;

  /// Estimated context size in tokens (exact counts come from a tokenizer).
  int64_t context_tokens() const { return approx_chars_ / 4; }

  /// True when the next turn would not fit the context limit.
  bool context_exhausted() const { return context_tokens() >= limits_.context_limit_tokens; }

  /// Malformed tool calls so far.
  int32_t malformed_calls() const { return malformed_; }

  /// Number of assistant turns so far.
  int32_t turns() const { return turns_; }

  /// The assistant texts in order.
  const std::vector<std::string>& assistant_texts() const { return assistant_texts_; }

  /// The tool observations in order (after truncation).
  std::vector<std::string> observations() const;

  /// Truncates `text` to `limit` bytes with a visible marker (UTF-8 safe).
  static std::string truncate(const std::string& text, size_t limit);

  /// The eval command a Bash command line asks for ("verify"/"profile"), if any.
  static std::optional<std::string> eval_command(const std::string& command);

 private:
  policy::chat_format fmt_;
  policy::json_array tools_;
  conversation_limits limits_;
  std::vector<policy::chat_message> messages_;
  std::vector<std::string> assistant_texts_;
  int64_t approx_chars_ = 0;
  int32_t malformed_ = 0;
  int32_t turns_ = 0;
};

}  // namespace caf_agent::rollout
