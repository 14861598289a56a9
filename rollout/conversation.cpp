// rollout/conversation.cpp: see conversation.hpp.
#include "rollout/conversation.hpp"

#include "policy/text/tool_call_parser.hpp"

namespace caf_agent::rollout {

conversation::conversation(std::string system_text, std::string task_text,
                           policy::json_array tools, conversation_limits limits)
    : tools_(std::move(tools)), limits_(limits) {
  approx_chars_ = static_cast<int64_t>(system_text.size() + task_text.size());
  for (auto& t : tools_) approx_chars_ += static_cast<int64_t>(policy::dump_json(t).size());
  messages_.push_back({"system", std::move(system_text), {}});
  messages_.push_back({"user", std::move(task_text), {}});
}

std::optional<std::string> conversation::eval_command(const std::string& command) {
  auto b = command.find_first_not_of(" \t\n");
  auto e = command.find_last_not_of(" \t\n;");
  if (b == std::string::npos) return std::nullopt;
  auto cmd = command.substr(b, e - b + 1);
  if (cmd.rfind("./", 0) == 0) cmd = cmd.substr(2);
  if (cmd == "verify" || cmd == "profile") return cmd;
  return std::nullopt;
}

std::vector<action> conversation::on_assistant(const std::string& text) {
  ++turns_;
  assistant_texts_.push_back(text);
  approx_chars_ += static_cast<int64_t>(text.size());
  auto parsed = policy::parse_assistant_turn(text);
  policy::chat_message msg{"assistant", parsed.content, {}};
  std::vector<action> out;
  for (auto& call : parsed.calls) {
    action a;
    a.call_id = "t" + std::to_string(turns_) + "c" + std::to_string(call.index);
    if (!call.ok) {
      ++malformed_;
      a.kind = action::invalid;
      a.error = policy::tool_call_error_text(call);
      out.push_back(std::move(a));
      continue;
    }
    msg.tool_calls.push_back({call.name, call.arguments});
    a.name = call.name;
    a.arguments_json = policy::dump_json(call.arguments);
    if (call.name == "Bash" && call.arguments.is_object()) {
      auto* cmd = call.arguments.find("command");
      if (cmd && cmd->is_string())
        if (auto ev = eval_command(cmd->as_string())) {
          a.kind = action::eval;
          a.name = *ev;
        }
    }
    out.push_back(std::move(a));
  }
  messages_.push_back(std::move(msg));
  return out;
}

void conversation::add_observation(const std::string& call_id, const std::string& output) {
  (void) call_id;
  auto text = truncate(output, static_cast<size_t>(limits_.observation_limit_bytes));
  approx_chars_ += static_cast<int64_t>(text.size());
  messages_.push_back({"tool", std::move(text), {}});
}

std::vector<std::string> conversation::observations() const {
  std::vector<std::string> out;
  for (auto& m : messages_)
    if (m.role == "tool") out.push_back(m.content);
  return out;
}

std::string conversation::prompt_text() const {
  return policy::render_chat(fmt_, messages_, tools_, true);
}

std::string conversation::truncate(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  // Keep the head and the tail: errors usually sit at the end of compiler output.
  size_t head = limit * 2 / 3;
  size_t tail = limit - head;
  while (head > 0 && (static_cast<unsigned char>(text[head]) & 0xC0) == 0x80) --head;
  size_t tail_start = text.size() - tail;
  while (tail_start < text.size() && (static_cast<unsigned char>(text[tail_start]) & 0xC0) == 0x80)
    ++tail_start;
  return text.substr(0, head) + "\n[... output truncated: " +
         std::to_string(tail_start - head) + " bytes omitted ...]\n" + text.substr(tail_start);
}

}  // namespace caf_agent::rollout
