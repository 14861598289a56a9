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
//
// A chat_format may instead name a checkpoint's own template family
// (chat_template.hpp recognizes the template text): Qwen2.5, Qwen3 and
// Llama 3.1, each rendered exactly as transformers' apply_chat_template
// renders that template (chat_render.cpp; tests/policy/text/test_chat_templates.py).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "policy/text/json.hpp"
#include "policy/text/result.hpp"

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

/// Which template a chat_format renders.
enum class chat_family : uint8_t {
  chatml_tools,  ///< this project's ChatML-with-tools format (the default)
  qwen2_5,       ///< the Qwen2.5 instruct template
  qwen3,         ///< the Qwen3 template (thinking)
  llama3_1,      ///< the Llama 3.1 / 3.3 instruct template (JSON tool calls)
};

/// "chatml-tools", "qwen2.5", "qwen3", "llama3.1".
const char* chat_family_name(chat_family f);

/// The fixed strings of the format.
struct chat_format {
  /// Opens a turn (the token the session checks the tokenizer for).
  std::string im_start = "<|im_start|>";
  /// Closes a turn; the policy stops sampling on it.
  std::string im_end = "<|im_end|>";
  /// The system text used when the conversation has no system message.
  std::string default_system = "You are a helpful assistant.";
  /// The template rendered; see chat_format_for_template to pick it.
  chat_family family = chat_family::chatml_tools;
  /// The tokenizer's bos_token, printed by templates that start with it (Llama 3.1).
  std::string bos_token;
  /// Qwen3's `enable_thinking` template variable; unset means undefined.
  std::optional<bool> enable_thinking;
  /// Where the format came from (a template file, for messages).
  std::string name = "chatml-tools (built in)";
};

/// A chat_format for one family with its fixed strings (im_start, im_end,
/// default system text); bos_token and enable_thinking are left to the caller.
chat_format chat_format_of_family(chat_family f);

/// The instruction text before the tool signatures (after the system text).
std::string_view tools_preamble();
/// The instruction text after the tool signatures.
std::string_view tools_postamble();

/// "<|im_start|>system\n...<|im_end|>\n", with the tool block when tools exist.
std::string render_system_header(const chat_format& fmt, std::string_view system, const json_array& tools);

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
/// default), turns, and optionally the generation prompt. Empty when the
/// template refuses the conversation (render_chat_checked says why).
std::string render_chat(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                        bool add_generation_prompt);

/// render_chat for any family: exactly what apply_chat_template renders with
/// the family's template, tools empty meaning tools=None. Errors where the
/// template raises (Llama 3.1: several tool calls in one message, tools
/// without a user message) or indexes an empty message list.
result<std::string> render_chat_checked(const chat_format& fmt, std::span<const chat_message> msgs,
                                        const json_array& tools, bool add_generation_prompt);

/// The text after the end-of-turn token of an assistant turn up to the next
/// generation prompt: the messages (tool results, user turns) rendered as the
/// family's template renders them after an assistant message.
result<std::string> render_observation(const chat_format& fmt, std::span<const chat_message> msgs);

/// The text after the last assistant turn's end-of-turn token in a full
/// rendering ("\n" for the ChatML families, nothing for Llama 3.1).
std::string closing_text(const chat_format& fmt);

/// What the policy samples for an assistant message in fmt's family, after
/// the generation prompt and before the end-of-turn token (Qwen3: without a
/// thinking block; Llama 3.1: the one tool call as JSON, or the trimmed text).
std::string render_assistant_body(const chat_format& fmt, const chat_message& msg);

}  // namespace caf_agent::policy
