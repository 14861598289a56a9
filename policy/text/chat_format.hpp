#pragma once
// The Qwen2.5-family ChatML chat format with tools, as text:
//
//   <|im_start|>system\n{system}\n\n# Tools ... <tools>\n{tool json}...\n</tools> ...<|im_end|>\n
//   <|im_start|>user\n{content}<|im_end|>\n
//   <|im_start|>assistant\n{content}\n<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call><|im_end|>\n
//   <|im_start|>user\n<tool_response>\n{result}\n</tool_response>...<|im_end|>\n   (consecutive tool messages)
//   <|im_start|>assistant\n                                                      (generation prompt)
//
// tests/policy/text/qwen25_tools_chat_template.jinja is the same format as a
// Jinja template; the parity tests check that both render identical tokens.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/text/json.hpp"

namespace caf_agent::policy {

/// A tool call of an assistant message.
struct tool_call {
  /// The function name.
  std::string name;
  /// The arguments: an object (rendered as JSON) or a string (rendered verbatim).
  json_value arguments = json_object{};
};

/// One chat message: role "system", "user", "assistant" or "tool".
struct chat_message {
  /// The role.
  std::string role;
  /// The text content.
  std::string content;
  /// Tool calls (assistant messages only).
  std::vector<tool_call> tool_calls;
};

/// The fixed strings of the format.
struct chat_format {
  /// Opens a turn.
  std::string im_start = "<|im_start|>";
  /// Closes a turn; the policy stops sampling on it.
  std::string im_end = "<|im_end|>";
  /// The system text used when the conversation has no system message.
  std::string default_system = "You are a helpful assistant.";
};

/// The instruction text before the tool signatures (after the system text).
std::string_view tools_preamble();
/// The instruction text after the tool signatures.
std::string_view tools_postamble();

/// "<|im_start|>system\n...<|im_end|>\n", with the tool block when tools exist.
std::string render_system_header(const chat_format& fmt, std::string_view system,
                                 const json_array& tools);

/// One tool call: "<tool_call>\n{"name": "...", "arguments": ...}\n</tool_call>".
std::string render_tool_call(const tool_call& call);

/// What the policy samples for an assistant message, after the generation
/// prompt and before <|im_end|>: content, then each tool call on its own line.
std::string render_assistant_body(const chat_message& msg);

/// Renders messages after the system header. Consecutive tool messages share
/// one user turn. A leading system message is NOT skipped here.
std::string render_turns(const chat_format& fmt, std::span<const chat_message> msgs);

/// "<|im_start|>assistant\n".
std::string generation_prompt(const chat_format& fmt);

/// The whole conversation: header (from a leading system message or the
/// default), turns, and optionally the generation prompt.
std::string render_chat(const chat_format& fmt, std::span<const chat_message> msgs,
                        const json_array& tools, bool add_generation_prompt);

} // namespace caf_agent::policy
