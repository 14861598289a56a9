// rollout/openai_policy.cpp: the openai policy backend (see policy_backend.hpp).
#include <chrono>

#include "policy/text/chat_format.hpp"
#include "rollout/policy_backend.hpp"
#include "serving/openai_client.hpp"

namespace caf_agent::rollout {

namespace {

using steady = std::chrono::steady_clock;

messages::completion failed(uint64_t request_id, std::string why) {
  messages::completion c;
  c.request_id = request_id;
  c.finish_reason = messages::completion_finish::error;
  c.error = std::move(why);
  return c;
}

/// messages_json (conversation::messages_json) -> the client's messages.
std::string read_messages(const std::string& text, std::vector<serving::chat_message>& out) {
  auto parsed = policy::parse_json(text);
  if (!parsed || !parsed->is_array()) return "messages_json is not a JSON array";
  for (const auto& m : parsed->as_array()) {
    if (!m.is_object()) return "messages_json: a message is not an object";
    serving::chat_message msg;
    auto* role = m.find("role");
    auto* content = m.find("content");
    if (!role || !role->is_string()) return "messages_json: a message has no role";
    msg.role = role->as_string();
    if (content && content->is_string()) msg.content = content->as_string();
    if (auto* calls = m.find("tool_calls"); calls && calls->is_array())
      for (const auto& call : calls->as_array()) {
        auto* name = call.find("name");
        auto* args = call.find("arguments");
        auto* id = call.find("id");
        msg.tool_calls.push_back({name && name->is_string() ? name->as_string() : std::string{},
                                  args ? *args : policy::json_value{policy::json_object{}}});
        msg.tool_call_ids.push_back(id && id->is_string() ? id->as_string() : std::string{});
      }
    if (auto* id = m.find("tool_call_id"); id && id->is_string()) msg.tool_call_id = id->as_string();
    out.push_back(std::move(msg));
  }
  return {};
}

class openai_policy final : public policy_backend {
 public:
  openai_policy(serving::openai_client client, policy::json_array tools)
      : client_(std::move(client)), tools_(std::move(tools)) {}

  backend_reply generate(const messages::generate_request& req) override {
    const auto t0 = steady::now();
    serving::chat_request chat;
    if (auto error = read_messages(req.messages_json, chat.messages); !error.empty())
      return {failed(req.request_id, error), {}};
    chat.tools = tools_;
    chat.temperature = req.sampling.temperature;
    chat.top_p = req.sampling.top_p;
    chat.top_k = req.sampling.top_k;
    chat.max_tokens = req.sampling.max_new_tokens;
    chat.stop = req.sampling.stop;
    // Rationale: reproducible runs, yet every episode and turn draws differently. 63 bits
    // because the seed travels as a JSON integer.
    chat.seed = (req.sampling.seed * 0x9E3779B97F4A7C15ull + req.request_id) & 0x7FFFFFFFFFFFFFFFull;
    chat.logprobs = true;
    auto answer = client_.chat(chat);
    if (!answer) return {failed(req.request_id, "openai server: " + answer.error().message), {}};
    auto& r = answer.value();
    messages::completion c;
    c.request_id = req.request_id;
    c.text = r.raw_text;
    c.tokens = std::move(r.token_ids);
    c.logprobs = std::move(r.logprobs);
    if (c.logprobs.size() != c.tokens.size()) c.logprobs.clear();  // a server that sent only some
    c.finish_reason =
        r.finish_reason == "length" ? messages::completion_finish::length : messages::completion_finish::stop;
    c.policy_version = r.policy_version;
    c.latency_us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - t0).count();
    return {std::move(c), {}};
  }

  backend_mode mode() const override { return backend_mode::blocking; }
  std::string name() const override { return "openai " + client_.options().base_url; }

  std::string publish_weights(const std::string& path, uint64_t version) override {
    auto st = client_.reload(path, version);
    if (!st) return "openai server reload: " + st.error().message;
    version_ = version;
    return {};
  }

 private:
  serving::openai_client client_;
  policy::json_array tools_;
};

}  // namespace

std::unique_ptr<policy_backend> make_openai_policy(const openai_policy_options& opts, std::string& error) {
  serving::client_options o;
  o.base_url = opts.base_url;
  o.api_key = opts.api_key;
  o.model = opts.model;
  o.request_timeout_ms = opts.timeout_ms;
  o.max_retries = opts.max_retries;
  auto client = serving::openai_client::create(o);
  if (!client) {
    error = "policy.base_url: " + client.error().message;
    return nullptr;
  }
  return std::make_unique<openai_policy>(std::move(client.value()), opts.tools);
}

}  // namespace caf_agent::rollout
