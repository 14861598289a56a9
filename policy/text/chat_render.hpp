#pragma once
// Internal: the renderers of the checkpoint templates chat_template.cpp
// recognizes. Each is a statement-by-statement transcription of its Jinja
// template as transformers runs it (trim_blocks, lstrip_blocks, tojson =
// json.dumps(ensure_ascii=False)); tests/policy/text/test_chat_templates.py
// compares them with jinja2 on the real template texts.

#include <span>
#include <string>
#include <string_view>

#include "policy/text/chat_format.hpp"
#include "policy/text/result.hpp"

namespace caf_agent::policy {

/// The Qwen2.5 instruct template.
result<std::string> render_qwen25(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                                  bool add_generation_prompt);
/// The Qwen3 template.
result<std::string> render_qwen3(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                                 bool add_generation_prompt);
/// The Llama 3.1 template (tools in the first user message, no builtin tools).
result<std::string> render_llama31(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                                   bool add_generation_prompt);

/// The message loop of a Qwen template over messages without assistants.
std::string render_qwen_turns(const chat_format& fmt, std::span<const chat_message> msgs);
/// The message loop of the Llama 3.1 template.
result<std::string> render_llama31_turns(std::span<const chat_message> msgs);

/// An assistant message's text after the generation prompt (Qwen families).
std::string qwen_assistant_body(const chat_format& fmt, const chat_message& msg);
/// An assistant message's text after the generation prompt (Llama 3.1).
std::string llama31_assistant_body(const chat_message& msg);

/// Python's str.strip() with no argument (str.isspace characters), which is
/// what Jinja's `trim` filter does.
std::string python_strip(std::string_view s);

}  // namespace caf_agent::policy
