// The Qwen2.5 and Qwen3 templates, transcribed statement by statement
// (see chat_render.hpp). Comments quote the template lines they follow.
#include "policy/text/chat_render.hpp"

namespace caf_agent::policy {

namespace {

constexpr std::string_view qwen_tools_intro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view qwen_tools_outro =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";

std::string tools_block(const json_array& tools) {
  std::string out(qwen_tools_intro);
  for (const auto& tool : tools) out += "\n" + dump_json(tool);  // {{- "\n" }}{{- tool | tojson }}
  out += qwen_tools_outro;
  return out;
}

// '<tool_call>\n{"name": "' + name + '", "arguments": ' + args + '}\n</tool_call>'; Qwen2.5
// prints `arguments | tojson` (a string argument is quoted), Qwen3 prints a
// string verbatim.
std::string qwen_tool_call(chat_family family, const tool_call& call) {
  std::string out = "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": ";
  if (family == chat_family::qwen3 && call.arguments.is_string())
    out += call.arguments.as_string();
  else
    out += dump_json(call.arguments);
  out += "}\n</tool_call>";
  return out;
}

// {%- elif message.role == "tool" %} ... consecutive tool messages share one user turn.
void qwen_tool_message(std::string& out, std::span<const chat_message> msgs, size_t i) {
  if (i == 0 || msgs[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n" + msgs[i].content + "\n</tool_response>";
  if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
}

std::string strip_chars(std::string_view s, bool left, bool right, char c) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && s[b] == c) ++b;
  if (right)
    while (e > b && s[e - 1] == c) --e;
  return std::string(s.substr(b, e - b));
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Qwen2.5's message loop; `whole`: msgs is the whole conversation (its first
// message is the one `loop.first` sees).
void qwen25_loop(std::string& out, std::span<const chat_message> msgs, bool whole) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    bool first = whole && i == 0;
    if (m.role == "user" || (m.role == "system" && !first) || (m.role == "assistant" && m.tool_calls.empty())) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      out += "<|im_start|>assistant";
      if (!m.content.empty()) out += "\n" + m.content;
      for (const auto& call : m.tool_calls) out += "\n" + qwen_tool_call(chat_family::qwen2_5, call);
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      qwen_tool_message(out, msgs, i);
    }
  }
}

// Qwen3's message loop; assistants after last_query get the thinking block
// when they are last or carry reasoning.
void qwen3_loop(std::string& out, std::span<const chat_message> msgs, bool whole, size_t last_query) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    bool first = whole && i == 0;
    bool last = i + 1 == msgs.size();
    if (m.role == "user" || (m.role == "system" && !first)) {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    } else if (m.role == "assistant") {
      std::string content = m.content;
      std::string reasoning;
      if (size_t close = m.content.find("</think>"); close != std::string::npos) {
        // content.split('</think>')[-1].lstrip('\n')
        size_t last_close = m.content.rfind("</think>");
        content = strip_chars(std::string_view(m.content).substr(last_close + 8), true, false, '\n');
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        std::string head = strip_chars(std::string_view(m.content).substr(0, close), false, true, '\n');
        size_t open = head.rfind("<think>");
        std::string_view tail =
            open == std::string::npos ? std::string_view(head) : std::string_view(head).substr(open + 7);
        reasoning = strip_chars(tail, true, false, '\n');
      }
      if (i > last_query && (last || !reasoning.empty()))
        out += "<|im_start|>assistant\n<think>\n" + strip_chars(reasoning, true, true, '\n') + "\n</think>\n\n" +
               strip_chars(content, true, false, '\n');
      else
        out += "<|im_start|>assistant\n" + content;
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        if ((k == 0 && !content.empty()) || k > 0) out += "\n";
        out += qwen_tool_call(chat_family::qwen3, m.tool_calls[k]);
      }
      out += "<|im_end|>\n";
    } else if (m.role == "tool") {
      qwen_tool_message(out, msgs, i);
    }
  }
}

}  // namespace

result<std::string> render_qwen25(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                                  bool add_generation_prompt) {
  if (msgs.empty()) return make_error("qwen2.5 chat template: messages[0] of an empty conversation");
  bool system_first = msgs[0].role == "system";
  const std::string& system = system_first ? msgs[0].content : fmt.default_system;
  std::string out;
  if (!tools.empty())
    out += "<|im_start|>system\n" + system + "\n\n" + tools_block(tools);
  else
    out += "<|im_start|>system\n" + system + "<|im_end|>\n";
  qwen25_loop(out, msgs, true);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

result<std::string> render_qwen3(const chat_format& fmt, std::span<const chat_message> msgs, const json_array& tools,
                                 bool add_generation_prompt) {
  if (msgs.empty()) return make_error("qwen3 chat template: messages[0] of an empty conversation");
  bool system_first = msgs[0].role == "system";
  std::string out;
  if (!tools.empty()) {
    out += "<|im_start|>system\n";
    if (system_first) out += msgs[0].content + "\n\n";
    out += tools_block(tools);
  } else if (system_first) {
    out += "<|im_start|>system\n" + msgs[0].content + "<|im_end|>\n";
  }
  // ns.last_query_index: the last user message that is not a wrapped tool response.
  size_t last_query = msgs.size() - 1;
  for (size_t i = msgs.size(); i-- > 0;) {
    const auto& m = msgs[i];
    if (m.role == "user" && !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  qwen3_loop(out, msgs, true, last_query);
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (fmt.enable_thinking == false) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string render_qwen_turns(const chat_format& fmt, std::span<const chat_message> msgs) {
  std::string out;
  if (fmt.family == chat_family::qwen3)
    qwen3_loop(out, msgs, false, msgs.size());
  else
    qwen25_loop(out, msgs, false);
  return out;
}

std::string qwen_assistant_body(const chat_format& fmt, const chat_message& msg) {
  std::string out = msg.content;
  for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
    if (k > 0 || !msg.content.empty()) out += "\n";
    out += qwen_tool_call(fmt.family, msg.tool_calls[k]);
  }
  return out;
}

}  // namespace caf_agent::policy
