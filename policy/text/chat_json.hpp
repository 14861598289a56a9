#pragma once
// Conversations as JSON (the OpenAI / transformers message format) and the
// render-chat command of policy_text_tool.

#include <vector>

#include "policy/text/chat_format.hpp"
#include "policy/text/result.hpp"
#include "policy/text/tokenizer.hpp"

namespace caf_agent::policy {

/// Reads [{"role": ..., "content": ..., "tool_calls": [...]}, ...]. Tool calls
/// may be {"name", "arguments"} or {"type": "function", "function": {...}}.
result<std::vector<chat_message>> messages_from_json(const json_value& messages);

/// Renders {"messages": [...], "tools": [...], "add_generation_prompt": bool,
/// "enable_thinking": bool (optional)} in fmt two ways: as one text ("text",
/// "ids") and incrementally with a chat_session, the assistant bodies standing
/// in for sampled tokens ("incremental": {"ids", "loss_mask", "turns"}, or
/// {"error"} when the session refuses the conversation). An error when the
/// template refuses the conversation.
result<json_value> render_conversation_json(const tokenizer& tok, const json_value& conversation, chat_format fmt = {});

}  // namespace caf_agent::policy
