#include "policy/text/chat_json.hpp"

#include "policy/text/chat_session.hpp"

namespace caf_agent::policy {

namespace {

result<tool_call> tool_call_from_json(const json_value& v, const std::string& where) {
  const json_value* fn = v.find("function");
  if (!fn) fn = &v;
  const auto* name = fn->find("name");
  if (!name || !name->is_string()) return make_error(where + ".name: missing or not a string");
  tool_call call{name->as_string(), json_object{}};
  if (const auto* args = fn->find("arguments"); args && !args->is_null()) call.arguments = *args;
  return call;
}

json_value ids_json(std::span<const token_id> ids) {
  json_array a;
  a.reserve(ids.size());
  for (auto id : ids) a.emplace_back(static_cast<int64_t>(id));
  return a;
}

// Feeds the conversation through a chat_session: everything up to the first
// assistant message is the prompt; each assistant body, tokenized, plays the
// sampled tokens; the messages between assistants are observations.
result<json_value> render_incremental(const tokenizer& tok, std::span<const chat_message> msgs, const json_array& tools,
                                      const chat_format& fmt) {
  size_t first = 0;
  while (first < msgs.size() && msgs[first].role != "assistant") ++first;
  auto session = chat_session::start(tok, msgs.subspan(0, first), tools, fmt);
  if (!session) return session.error();
  for (size_t i = first; i < msgs.size();) {
    auto sampled = tok.encode(render_assistant_body(fmt, msgs[i]));
    sampled.push_back(session->im_end_id());
    if (auto s = session->append_sampled(sampled); !s) return s.error();
    size_t j = ++i;
    while (j < msgs.size() && msgs[j].role != "assistant") ++j;
    if (j == msgs.size() && j == i) break;  // ends with this assistant turn
    // Consecutive assistants: an empty observation (just the next generation prompt).
    if (auto s = session->append_observation(msgs.subspan(i, j - i)); !s) return s.error();
    i = j;
  }
  if (!session->awaiting_assistant())
    if (auto s = session->close(); !s) return s.error();
  json_array mask, turns;
  for (auto m : session->loss_mask()) mask.emplace_back(static_cast<int64_t>(m));
  for (const auto& t : session->turns())
    turns.push_back(json_object{{"kind", turn_kind_name(t.kind)},
                                {"begin", static_cast<int64_t>(t.begin)},
                                {"end", static_cast<int64_t>(t.end)}});
  return json_value(json_object{{"ids", ids_json(session->tokens())},
                                {"loss_mask", json_value(std::move(mask))},
                                {"turns", json_value(std::move(turns))}});
}

}  // namespace

result<std::vector<chat_message>> messages_from_json(const json_value& messages) {
  if (!messages.is_array()) return make_error("messages: expected an array");
  std::vector<chat_message> out;
  for (size_t i = 0; i < messages.as_array().size(); ++i) {
    const auto& m = messages.as_array()[i];
    std::string where = "messages[" + std::to_string(i) + "]";
    const auto* role = m.find("role");
    if (!role || !role->is_string()) return make_error(where + ".role: missing or not a string");
    chat_message msg{role->as_string(), {}, {}};
    if (const auto* c = m.find("content"); c && c->is_string()) msg.content = c->as_string();
    if (const auto* calls = m.find("tool_calls"); calls && calls->is_array()) {
      for (size_t k = 0; k < calls->as_array().size(); ++k) {
        auto call = tool_call_from_json(calls->as_array()[k], where + ".tool_calls[" + std::to_string(k) + "]");
        if (!call) return call.error();
        msg.tool_calls.push_back(std::move(*call));
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

result<json_value> render_conversation_json(const tokenizer& tok, const json_value& conversation, chat_format fmt) {
  const auto* msgs_json = conversation.find("messages");
  if (!msgs_json) return make_error("conversation: missing \"messages\"");
  auto msgs = messages_from_json(*msgs_json);
  if (!msgs) return msgs.error();
  json_array tools;
  if (const auto* t = conversation.find("tools"); t && t->is_array()) tools = t->as_array();
  bool gen = false;
  if (const auto* g = conversation.find("add_generation_prompt"); g && g->is_bool()) gen = g->as_bool();
  if (const auto* t = conversation.find("enable_thinking"); t && t->is_bool()) fmt.enable_thinking = t->as_bool();
  auto text = render_chat_checked(fmt, *msgs, tools, gen);
  if (!text) return text.error();
  json_value incremental_json;
  if (auto incremental = render_incremental(tok, *msgs, tools, fmt))
    incremental_json = std::move(*incremental);
  else
    incremental_json = json_object{{"error", incremental.error().message}};
  return json_value(json_object{{"text", *text},
                                {"format", fmt.name},
                                {"ids", ids_json(tok.encode(*text))},
                                {"incremental", std::move(incremental_json)}});
}

}  // namespace caf_agent::policy
