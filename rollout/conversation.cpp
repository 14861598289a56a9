// rollout/conversation.cpp: see conversation.hpp.
#include "rollout/conversation.hpp"

#include "policy/text/tool_call_parser.hpp"
#include "sandbox/output_format.hpp"

namespace caf_agent::rollout {

conversation::conversation(std::string system_text, std::string task_text, policy::json_array tools,
                           conversation_limits limits, const policy::tokenizer* tok, policy::chat_format fmt)
    : fmt_(std::move(fmt)), tools_(std::move(tools)), limits_(limits), tok_(tok) {
  approx_chars_ = static_cast<int64_t>(system_text.size() + task_text.size());
  for (auto& t : tools_) approx_chars_ += static_cast<int64_t>(policy::dump_json(t).size());
  messages_.push_back({"system", std::move(system_text), {}});
  messages_.push_back({"user", std::move(task_text), {}});
  call_ids_.resize(2);
  answers_to_.resize(2);
  if (!tok_) return;
  auto session = policy::chat_session::start(*tok_, messages_, tools_, fmt_);
  if (!session) {
    token_error_ = session.error().message;
    return;
  }
  session_ = std::make_unique<policy::chat_session>(std::move(session.value()));
  logprobs_.assign(session_->tokens().size(), 0.0f);
}

int64_t conversation::context_tokens() const {
  if (!session_) return approx_chars_ / 4;
  int64_t pending = 0;
  for (auto& m : pending_obs_) pending += static_cast<int64_t>(m.content.size()) / 4;
  return static_cast<int64_t>(session_->tokens().size()) + pending;
}

const std::vector<int32_t>& conversation::prompt_tokens() {
  static const std::vector<int32_t> none;
  if (!session_) return none;
  if (!session_->awaiting_assistant()) {
    if (auto st = session_->append_observation(pending_obs_); !st) token_error_ = st.error().message;
    pending_obs_.clear();
    logprobs_.resize(session_->tokens().size(), 0.0f);
  }
  return session_->tokens();
}

std::vector<action> conversation::on_sampled(const std::vector<int32_t>& tokens, const std::vector<float>& logprobs) {
  if (!session_) return on_assistant(std::string{});
  const size_t begin = session_->tokens().size();
  if (auto st = session_->append_sampled(tokens); !st) token_error_ = st.error().message;
  logprobs_.resize(session_->tokens().size(), 0.0f);
  for (size_t i = 0; i < tokens.size() && i < logprobs.size() && begin + i < logprobs_.size(); ++i)
    logprobs_[begin + i] = logprobs[i];
  // The text the parser sees stops before the end-of-turn token.
  std::span<const int32_t> body(tokens);
  if (!body.empty() && body.back() == session_->im_end_id()) body = body.first(body.size() - 1);
  return on_assistant(tok_->decode(body));
}

void conversation::close_tokens() {
  if (session_ && !session_->awaiting_assistant()) {
    if (pending_obs_.empty()) {
      (void)session_->close();
    } else {  // the turn limit cut in after tool calls: keep their observations
      (void)session_->append_observation(pending_obs_);
      pending_obs_.clear();
    }
    logprobs_.resize(session_->tokens().size(), 0.0f);
  }
}

const std::vector<int32_t>& conversation::tokens() const {
  static const std::vector<int32_t> none;
  return session_ ? session_->tokens() : none;
}

const std::vector<uint8_t>& conversation::loss_mask() const {
  static const std::vector<uint8_t> none;
  return session_ ? session_->loss_mask() : none;
}

std::vector<uint32_t> conversation::assistant_turn_starts() const {
  std::vector<uint32_t> out;
  if (!session_) return out;
  for (auto& span : session_->turns())
    if (span.kind == policy::turn_kind::assistant) out.push_back(static_cast<uint32_t>(span.begin));
  return out;
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
  auto parsed = policy::parse_assistant_turn(fmt_, text);
  policy::chat_message msg{"assistant", parsed.content, {}};
  std::vector<std::string> ids;
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
    ids.push_back(a.call_id);
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
  call_ids_.push_back(std::move(ids));
  answers_to_.emplace_back();
  return out;
}

void conversation::add_observation(const std::string& call_id, const std::string& output) {
  add_tool_output(call_id, sandbox::truncate_middle(output, static_cast<size_t>(limits_.observation_limit_bytes)));
}

void conversation::add_tool_output(const std::string& call_id, std::string text) {
  approx_chars_ += static_cast<int64_t>(text.size());
  if (session_) pending_obs_.push_back({"tool", text, {}});
  messages_.push_back({"tool", std::move(text), {}});
  call_ids_.emplace_back();
  answers_to_.push_back(call_id);
}

std::string conversation::messages_json() const {
  policy::json_array out;
  for (size_t i = 0; i < messages_.size(); ++i) {
    const auto& m = messages_[i];
    policy::json_object o{{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
      policy::json_array calls;
      for (size_t k = 0; k < m.tool_calls.size(); ++k)
        calls.push_back(policy::json_object{{"id", k < call_ids_[i].size() ? call_ids_[i][k] : std::string{}},
                                            {"name", m.tool_calls[k].name},
                                            {"arguments", m.tool_calls[k].arguments}});
      o.emplace_back("tool_calls", std::move(calls));
    }
    if (!answers_to_[i].empty()) o.emplace_back("tool_call_id", answers_to_[i]);
    out.push_back(std::move(o));
  }
  return policy::dump_json(policy::json_value{std::move(out)});
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

}  // namespace caf_agent::rollout
