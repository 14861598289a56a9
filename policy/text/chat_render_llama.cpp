// The Llama 3.1 instruct template (also Llama 3.3's), transcribed statement
// by statement (see chat_render.hpp): tools_in_user_message = true,
// date_string = "26 Jul 2024", no custom_tools / builtin_tools.
#include "policy/text/chat_render.hpp"

#include "policy/text/utf8.hpp"

namespace caf_agent::policy {

namespace {

// str.isspace(): White_Space plus the ASCII separators U+001C..U+001F.
bool python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string header(std::string_view role) {
  return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n";
}

std::string tool_call_json(const tool_call& call) {
  // '{"name": "' + tool_call.name + '", ' + '"parameters": ' + arguments | tojson + "}"
  return "{\"name\": \"" + call.name + "\", \"parameters\": " + dump_json(call.arguments) + "}";
}

}  // namespace

std::string python_strip(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    auto c = decode_utf8(s, b);
    if (!c.valid || !python_space(c.cp)) break;
    b += c.len;
  }
  size_t e = s.size();
  while (e > b) {
    size_t p = e - 1;
    while (p > b && (static_cast<uint8_t>(s[p]) & 0xC0) == 0x80 && e - p < 4) --p;
    auto c = decode_utf8(s, p);
    if (!c.valid || p + c.len != e || !python_space(c.cp)) break;
    e = p;
  }
  return std::string(s.substr(b, e - b));
}

result<std::string> render_llama31_turns(std::span<const chat_message> msgs) {
  std::string out;
  for (const auto& m : msgs) {
    bool has_calls = !m.tool_calls.empty();
    if (!(m.role == "ipython" || m.role == "tool" || has_calls)) {
      out += header(m.role) + python_strip(m.content) + "<|eot_id|>";
    } else if (has_calls) {
      if (m.tool_calls.size() != 1)
        return make_error("llama3.1 chat template: This model only supports single tool-calls at once!");
      out += header("assistant") + tool_call_json(m.tool_calls[0]) + "<|eot_id|>";
    } else {
      // A string content `is iterable`, so it is printed with tojson (quoted).
      std::string quoted;
      append_json_string(quoted, m.content);
      out += header("ipython") + quoted + "<|eot_id|>";
    }
  }
  return out;
}

result<std::string> render_llama31(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                                   bool add_generation_prompt) {
  if (msgs.empty()) return make_error("llama3.1 chat template: messages[0] of an empty conversation");
  std::string out = fmt.bos_token;
  std::string system_message;
  if (msgs[0].role == "system") {
    system_message = python_strip(msgs[0].content);
    msgs = msgs.subspan(1);
  }
  out += header("system");
  if (!tools.empty()) out += "Environment: ipython\n";
  out += "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  out += system_message + "<|eot_id|>";
  if (!tools.empty()) {
    if (msgs.empty())
      return make_error(
          "llama3.1 chat template: Cannot put tools in the first user message when "
          "there's no first user message!");
    std::string first_user = python_strip(msgs[0].content);
    msgs = msgs.subspan(1);
    out += header("user");
    out +=
        "Given the following functions, please respond with a JSON for a function call "
        "with its proper arguments that best answers the given prompt.\n\n"
        "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument "
        "name and its value}.Do not use variables.\n\n";
    json_dump_options indented;
    indented.item_separator = ",";
    indented.indent = 4;
    for (const auto& t : tools) out += dump_json(t, indented) + "\n\n";
    out += first_user + "<|eot_id|>";
  }
  auto turns = render_llama31_turns(msgs);
  if (!turns) return turns.error();
  out += *turns;
  if (add_generation_prompt) out += header("assistant");
  return out;
}

std::string llama31_assistant_body(const chat_message& msg) {
  if (!msg.tool_calls.empty()) return tool_call_json(msg.tool_calls[0]);
  return python_strip(msg.content);
}

}  // namespace caf_agent::policy
