#include "policy/text/chat_format.hpp"

namespace caf_agent::policy {

std::string_view tools_preamble() {
  return "\n\n# Tools\n\nYou can call the functions below. Their signatures are given "
         "inside <tools></tools>:\n<tools>";
}

std::string_view tools_postamble() {
  return "\n</tools>\n\nTo call a function, write one JSON object with its name and "
         "arguments inside <tool_call></tool_call> tags, like this:\n<tool_call>\n"
         "{\"name\": <function-name>, \"arguments\": <arguments-json-object>}\n</tool_call>";
}

std::string render_system_header(const chat_format& fmt, std::string_view system,
                                  const json_array& tools) {
  std::string out = fmt.im_start + "system\n";
  out += system;
  if (!tools.empty()) {
    out += tools_preamble();
    for (const auto& tool : tools) out += "\n" + dump_json(tool);
    out += tools_postamble();
  }
  out += fmt.im_end + "\n";
  return out;
}

std::string render_tool_call(const tool_call& call) {
  std::string out = "<tool_call>\n{\"name\": ";
  append_json_string(out, call.name);
  out += ", \"arguments\": ";
  out += call.arguments.is_string() ? call.arguments.as_string() : dump_json(call.arguments);
  out += "}\n</tool_call>";
  return out;
}

std::string render_assistant_body(const chat_message& msg) {
  std::string out = msg.content;
  for (size_t i = 0; i < msg.tool_calls.size(); ++i) {
    if (i > 0 || !msg.content.empty()) out += "\n";
    out += render_tool_call(msg.tool_calls[i]);
  }
  return out;
}

std::string render_turns(const chat_format& fmt, std::span<const chat_message> msgs) {
  std::string out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    if (m.role == "assistant") {
      out += generation_prompt(fmt) + render_assistant_body(m) + fmt.im_end + "\n";
    } else if (m.role == "tool") {
      if (i == 0 || msgs[i - 1].role != "tool") out += fmt.im_start + "user";
      out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
      if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += fmt.im_end + "\n";
    } else {
      out += fmt.im_start + m.role + "\n" + m.content + fmt.im_end + "\n";
    }
  }
  return out;
}

std::string generation_prompt(const chat_format& fmt) {
  return fmt.im_start + "assistant\n";
}

std::string render_chat(const chat_format& fmt, std::span<const chat_message> msgs,
                        const json_array& tools, bool add_generation_prompt) {
  bool has_system = !msgs.empty() && msgs.front().role == "system";
  std::string out =
    render_system_header(fmt, has_system ? msgs.front().content : fmt.default_system, tools);
  out += render_turns(fmt, has_system ? msgs.subspan(1) : msgs);
  if (add_generation_prompt) out += generation_prompt(fmt);
  return out;
}

} // namespace caf_agent::policy
