#include "policy/text/chat_session.hpp"

namespace caf_agent::policy {

const char* turn_kind_name(turn_kind k) {
  switch (k) {
    case turn_kind::prompt:
      return "prompt";
    case turn_kind::assistant:
      return "assistant";
    case turn_kind::observation:
      return "observation";
    case turn_kind::closing:
      return "closing";
  }
  return "unknown";
}

chat_session::chat_session(tokenizer tok, chat_format fmt, token_id im_end)
    : tok_(std::move(tok)), fmt_(std::move(fmt)), im_end_id_(im_end) {}

result<chat_session> chat_session::start(tokenizer tok, std::span<const chat_message> prompt, const json_array& tools,
                                         chat_format fmt) {
  auto im_start = tok.token_to_id(fmt.im_start);
  auto im_end = tok.token_to_id(fmt.im_end);
  if (!im_start || !im_end)
    return make_error("chat_session: the tokenizer has no '" + (im_start ? fmt.im_end : fmt.im_start) + "' token");
  for (const auto& m : prompt)
    if (m.role == "assistant") return make_error("chat_session: the prompt may not contain assistant messages");
  auto text = render_chat_checked(fmt, prompt, tools, /*add_generation_prompt=*/true);
  if (!text) return make_error("chat_session: " + text.error().message);
  chat_session s(std::move(tok), std::move(fmt), *im_end);
  s.push(turn_kind::prompt, s.tok_.encode(*text), 0);
  return s;
}

void chat_session::push(turn_kind kind, std::span<const token_id> ids, uint8_t mask) {
  size_t begin = tokens_.size();
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
  mask_.insert(mask_.end(), ids.size(), mask);
  if (!turns_.empty() && turns_.back().kind == kind && turns_.back().end == begin)
    turns_.back().end = tokens_.size();
  else
    turns_.push_back({kind, begin, tokens_.size()});
}

status chat_session::append_sampled(std::span<const token_id> sampled) {
  if (closed_ || !awaiting_assistant_)
    return make_error("chat_session: sampled tokens arrived when no assistant turn was open");
  push(turn_kind::assistant, sampled, 1);
  if (sampled.empty() || sampled.back() != im_end_id_) {
    token_id end[] = {im_end_id_};
    push(turn_kind::assistant, end, 0);
  }
  awaiting_assistant_ = false;
  return {};
}

status chat_session::append_observation(std::span<const chat_message> msgs) {
  if (closed_ || awaiting_assistant_) return make_error("chat_session: an observation must follow an assistant turn");
  auto text = render_observation(fmt_, msgs);
  if (!text) return make_error("chat_session: " + text.error().message);
  push(turn_kind::observation, tok_.encode(*text), 0);
  awaiting_assistant_ = true;
  return {};
}

status chat_session::close() {
  if (closed_) return make_error("chat_session: already closed");
  if (awaiting_assistant_) return make_error("chat_session: close() must follow an assistant turn");
  push(turn_kind::closing, tok_.encode(closing_text(fmt_)), 0);
  closed_ = true;
  return {};
}

}  // namespace caf_agent::policy
