#include "policy/text/chat_format.hpp"

#include "policy/text/chat_render.hpp"

namespace caf_agent::policy {

const char* chat_family_name(chat_family f) {
  switch (f) {
    case chat_family::chatml_tools:
      return "chatml-tools";
    case chat_family::qwen2_5:
      return "qwen2.5";
    case chat_family::qwen3:
      return "qwen3";
    case chat_family::llama3_1:
      return "llama3.1";
  }
  return "unknown";
}

chat_format chat_format_of_family(chat_family f) {
  chat_format fmt;
  fmt.family = f;
  fmt.name = std::string(chat_family_name(f)) + " (built in)";
  if (f == chat_family::qwen2_5)
    fmt.default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
  if (f == chat_family::qwen3) fmt.default_system.clear();
  if (f == chat_family::llama3_1) {
    fmt.im_start = "<|start_header_id|>";
    fmt.im_end = "<|eot_id|>";
    fmt.default_system.clear();
  }
  return fmt;
}

std::string_view tools_preamble() {
  return "\n\n# Tools\n\nYou can call the functions below. Their signatures are given "
         "inside <tools></tools>:\n<tools>";
}

std::string_view tools_postamble() {
  return "\n</tools>\n\nTo call a function, write one JSON object with its name and "
         "arguments inside <tool_call></tool_call> tags, like this:\n<tool_call>\n"
         "{\"name\": <function-name>, \"arguments\": <arguments-json-object>}\n</tool_call>";
}

std::string render_system_header(const chat_format& fmt, std::string_view system, const json_array& tools) {
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
  if (fmt.family == chat_family::llama3_1) return "<|start_header_id|>assistant<|end_header_id|>\n\n";
  std::string out = fmt.im_start + "assistant\n";
  if (fmt.family == chat_family::qwen3 && fmt.enable_thinking == false) out += "<think>\n\n</think>\n\n";
  return out;
}

std::string render_chat(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                        bool add_generation_prompt) {
  auto text = render_chat_checked(fmt, msgs, tools, add_generation_prompt);
  return text ? std::move(*text) : std::string();
}

result<std::string> render_chat_checked(const chat_format& fmt, std::span<const chat_message> msgs,
                                        const json_array& tools, bool add_generation_prompt) {
  switch (fmt.family) {
    case chat_family::qwen2_5:
      return render_qwen25(fmt, msgs, tools, add_generation_prompt);
    case chat_family::qwen3:
      return render_qwen3(fmt, msgs, tools, add_generation_prompt);
    case chat_family::llama3_1:
      return render_llama31(fmt, msgs, tools, add_generation_prompt);
    case chat_family::chatml_tools:
      break;
  }
  bool has_system = !msgs.empty() && msgs.front().role == "system";
  std::string out = render_system_header(fmt, has_system ? msgs.front().content : fmt.default_system, tools);
  out += render_turns(fmt, has_system ? msgs.subspan(1) : msgs);
  if (add_generation_prompt) out += generation_prompt(fmt);
  return out;
}

result<std::string> render_observation(const chat_format& fmt, std::span<const chat_message> msgs) {
  for (const auto& m : msgs)
    if (m.role == "assistant") return make_error("observations may not contain assistant messages");
  switch (fmt.family) {
    case chat_family::qwen2_5:
    case chat_family::qwen3:
      return "\n" + render_qwen_turns(fmt, msgs) + generation_prompt(fmt);
    case chat_family::llama3_1: {
      auto turns = render_llama31_turns(msgs);
      if (!turns) return turns.error();
      return *turns + generation_prompt(fmt);
    }
    case chat_family::chatml_tools:
      break;
  }
  return "\n" + render_turns(fmt, msgs) + generation_prompt(fmt);
}

std::string closing_text(const chat_format& fmt) {
  return fmt.family == chat_family::llama3_1 ? std::string() : std::string("\n");
}

std::string render_assistant_body(const chat_format& fmt, const chat_message& msg) {
  switch (fmt.family) {
    case chat_family::qwen2_5:
    case chat_family::qwen3:
      return qwen_assistant_body(fmt, msg);
    case chat_family::llama3_1:
      return llama31_assistant_body(msg);
    case chat_family::chatml_tools:
      break;
  }
  return render_assistant_body(msg);
}

}  // namespace caf_agent::policy
