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

#include <memory>

#include "policy/text/chat_format.hpp"
#include "policy/text/chat_session.hpp"
#include "policy/text/json.hpp"
#include "policy/text/tokenizer.hpp"

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
///
/// Text mode (no tokenizer): backends get the rendered prompt text. Token mode
/// (a tokenizer, for token-level backends such as libtorch): the conversation
/// also keeps the exact token sequence in a policy::chat_session, so the record
/// holds the tokens the sampler saw and produced, never a re-tokenization.
class conversation {
 public:
  /// `system_text` is SKILL.md (and anything else the agent must know);
  /// `task_text` the user message; `tools` the tool schemas. With `tok` the
  /// conversation runs in token mode; token_error() says if that failed.
  /// `fmt` is the checkpoint's chat format (policy::checkpoint_chat_format).
  conversation(std::string system_text, std::string task_text, policy::json_array tools, conversation_limits limits,
               const policy::tokenizer* tok = nullptr, policy::chat_format fmt = {});

  /// Adds the assistant's turn and returns the actions its tool calls ask for.
  /// No actions means the agent gave its final answer.
  std::vector<action> on_assistant(const std::string& text);

  /// Adds an observation the episode wrote itself (a verdict, an invalid call's error) for the
  /// call `call_id`, cut to the observation limit (sandbox::truncate_middle).
  void add_observation(const std::string& call_id, const std::string& output);

  /// Adds a tool's output for the call `call_id` as it is: the sandbox cut it already, at
  /// rollout_config::tool_sandbox's cap (no more than the observation limit), so the agent sees
  /// that one cut and its marker counts the bytes the tool really dropped.
  void add_tool_output(const std::string& call_id, std::string output);

  /// The whole conversation in the chat format, ending with the generation prompt.
  std::string prompt_text() const;

  /// The conversation as a JSON array for chat backends (openai):
  /// {role, content, tool_calls: [{id, name, arguments}], tool_call_id}.
  std::string messages_json() const;

  /// Context size in tokens: exact in token mode, else estimated (4 bytes per token).
  int64_t context_tokens() const;

  // -- token mode -----------------------------------------------------------

  /// True when a tokenizer was given.
  bool token_mode() const { return session_ != nullptr || !token_error_.empty(); }
  /// Why token mode could not start or continue (empty when fine).
  const std::string& token_error() const { return token_error_; }
  /// The whole token sequence ending with the generation prompt; appends the
  /// observations added since the last assistant turn first.
  const std::vector<int32_t>& prompt_tokens();
  /// Adds sampled tokens verbatim (with the sampler's logprobs), decodes them
  /// into the assistant text and returns its actions like on_assistant().
  std::vector<action> on_sampled(const std::vector<int32_t>& tokens, const std::vector<float>& logprobs);
  /// Ends the token sequence (after the final assistant turn). Harmless twice.
  void close_tokens();
  /// Token mode: every token so far, 1 on sampled tokens, the sampler's logprob
  /// per token (0 where not sampled), and where each assistant turn starts.
  const std::vector<int32_t>& tokens() const;
  const std::vector<uint8_t>& loss_mask() const;
  const std::vector<float>& token_logprobs() const { return logprobs_; }
  std::vector<uint32_t> assistant_turn_starts() const;

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

  /// The eval command a Bash command line asks for ("verify"/"profile"), if any.
  static std::optional<std::string> eval_command(const std::string& command);

 private:
  policy::chat_format fmt_;
  policy::json_array tools_;
  conversation_limits limits_;
  std::vector<policy::chat_message> messages_;
  std::vector<std::vector<std::string>> call_ids_;  ///< per message: its tool calls' ids
  std::vector<std::string> answers_to_;             ///< per message: the call a tool message answers
  std::vector<std::string> assistant_texts_;
  int64_t approx_chars_ = 0;
  int32_t malformed_ = 0;
  int32_t turns_ = 0;
  // Token mode.
  std::unique_ptr<policy::chat_session> session_;
  const policy::tokenizer* tok_ = nullptr;
  std::vector<policy::chat_message> pending_obs_;
  std::vector<float> logprobs_;
  std::string token_error_;
};

}  // namespace caf_agent::rollout
