#pragma once
// A tolerant parser for the tool calls in an assistant turn. It accepts what
// LLMs actually write: several <tool_call> blocks, a missing closing tag at
// the end of the text, arguments given as a JSON string, trailing commas,
// raw newlines inside strings, Markdown code fences around the JSON. What it
// cannot read becomes a failed call with an observation text for the agent;
// it never throws.

#include <string>
#include <string_view>
#include <vector>

#include "policy/text/chat_format.hpp"
#include "policy/text/json.hpp"

namespace caf_agent::policy {

/// One <tool_call> block, parsed or not.
struct parsed_tool_call {
  /// 1-based position among the turn's tool calls.
  size_t index = 0;
  /// True when name and arguments were read.
  bool ok = false;
  /// The function name (when ok).
  std::string name;
  /// The arguments object (when ok; {} if the call gave none).
  json_value arguments = json_object{};
  /// Why the call could not be read (when !ok), e.g.
  /// "invalid JSON at offset 17: expected ',' or '}' in object, got ']'".
  std::string error;
  /// The block's text between the tags.
  std::string raw;
};

/// An assistant turn split into prose and tool calls.
struct assistant_turn {
  /// The text outside tool-call blocks, trimmed.
  std::string content;
  /// The tool calls in order.
  std::vector<parsed_tool_call> calls;
  /// A turn without tool calls is the agent's final answer.
  bool is_final_answer() const { return calls.empty(); }
};

/// Splits an assistant turn's text into content and tool calls.
assistant_turn parse_assistant_turn(std::string_view text);

/// The same in fmt's family: Llama 3.1 writes a tool call as the whole turn,
/// `{"name": ..., "parameters": {...}}` (optionally after <|python_tag|>), so
/// a turn that starts with '{' is read as one call (a failed call when the
/// JSON cannot be read or has no "name"); the ChatML families use the
/// <tool_call> blocks of parse_assistant_turn(text).
assistant_turn parse_assistant_turn(const chat_format& fmt, std::string_view text);

/// The observation the agent sees for a failed call:
/// "tool call 2: invalid JSON at offset 17: ...".
std::string tool_call_error_text(const parsed_tool_call& call);

/// The turn as JSON (for policy_text_tool and logs).
json_value assistant_turn_to_json(const assistant_turn& turn);

}  // namespace caf_agent::policy
