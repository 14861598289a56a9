// serving/openai_response_json.cpp: chat responses and errors to and from OpenAI JSON
// (openai_json.hpp).
#include <cmath>
#include <limits>

#include "policy/text/utf8.hpp"
#include "serving/openai_json.hpp"

namespace caf_agent::serving {

using policy::json_array;
using policy::json_kind_name;
using policy::json_object;
using policy::json_value;

namespace {

// Rationale: OpenAI reports an impossible token as -9999.0; JSON has no -Infinity.
constexpr double floor_logprob = -9999.0;

json_value ids_json(const std::vector<int32_t>& ids) {
  json_array a;
  a.reserve(ids.size());
  for (auto id : ids) a.emplace_back(static_cast<int64_t>(id));
  return a;
}

json_value logprob_json(float v) {
  return std::isfinite(v) ? float_json(v) : json_value(floor_logprob);
}

json_value logprobs_json(const chat_response& r) {
  json_array content;
  content.reserve(r.logprobs.size());
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    const std::string bytes = i < r.token_texts.size() ? r.token_texts[i] : std::string();
    json_array byte_values;
    for (unsigned char c : bytes) byte_values.emplace_back(static_cast<int64_t>(c));
    content.push_back(json_object{{"token", policy::utf8_lossy(bytes)},
                                  {"logprob", logprob_json(r.logprobs[i])},
                                  {"bytes", std::move(byte_values)},
                                  {"top_logprobs", json_array{}}});
  }
  return json_object{{"content", std::move(content)}};
}

json_value message_json(const chat_response& r) {
  json_object msg{{"role", "assistant"}};
  // OpenAI sends null content beside tool calls when the model wrote no prose.
  msg.emplace_back(
      "content", r.content.empty() && !r.tool_calls.empty() ? json_value() : json_value(policy::utf8_lossy(r.content)));
  if (!r.tool_calls.empty()) {
    json_array calls;
    for (size_t k = 0; k < r.tool_calls.size(); ++k) {
      const auto& c = r.tool_calls[k];
      const std::string args = c.arguments.is_string() ? c.arguments.as_string() : policy::dump_json(c.arguments);
      calls.push_back(json_object{
          {"id", k < r.tool_call_ids.size() ? r.tool_call_ids[k] : std::string()},
          {"type", "function"},
          {"function", json_object{{"name", policy::utf8_lossy(c.name)}, {"arguments", policy::utf8_lossy(args)}}}});
    }
    msg.emplace_back("tool_calls", std::move(calls));
  }
  return msg;
}

serving_error missing(const std::string& field, const std::string& what = {}) {
  return make_serving_error(errc::protocol, "missing field " + field + (what.empty() ? "" : " (" + what + ")"), field);
}

serving_error wrong(const std::string& field, const std::string& expected, const json_value& v) {
  return make_serving_error(errc::protocol,
                            "field " + field + ": expected " + expected + ", got " + json_kind_name(v.kind()), field);
}

const json_value* member(const json_value& obj, std::string_view key) {
  const auto* v = obj.find(key);
  return v && !v->is_null() ? v : nullptr;
}

status read_ids(const json_value& v, const std::string& field, std::vector<int32_t>& out) {
  if (!v.is_array()) return wrong(field, "an array of token ids", v);
  for (size_t i = 0; i < v.as_array().size(); ++i) {
    const auto& id = v.as_array()[i];
    if (!id.is_integer() || id.as_integer() < 0 || id.as_integer() > std::numeric_limits<int32_t>::max())
      return wrong(field + "[" + std::to_string(i) + "]", "a token id", id);
    out.push_back(static_cast<int32_t>(id.as_integer()));
  }
  return {};
}

status read_tool_calls(const json_value& calls, chat_response& out) {
  if (!calls.is_array()) return wrong("choices[0].message.tool_calls", "an array", calls);
  for (size_t k = 0; k < calls.as_array().size(); ++k) {
    const auto& c = calls.as_array()[k];
    const std::string at = "choices[0].message.tool_calls[" + std::to_string(k) + "]";
    const auto* fn = c.is_object() ? member(c, "function") : nullptr;
    const auto* name = fn && fn->is_object() ? member(*fn, "name") : nullptr;
    if (!name || !name->is_string()) return missing(at + ".function.name");
    policy::tool_call call{name->as_string(), json_object{}};
    if (const auto* args = member(*fn, "arguments")) {
      if (args->is_string()) {
        auto parsed = policy::parse_json(args->as_string());
        call.arguments = parsed ? std::move(parsed).value() : *args;  // not JSON: kept as written
      } else {
        call.arguments = *args;
      }
    }
    const auto* id = member(c, "id");
    out.tool_call_ids.push_back(id && id->is_string() ? id->as_string() : std::string());
    out.tool_calls.push_back(std::move(call));
  }
  return {};
}

status read_logprobs(const json_value& lp, chat_response& out) {
  const auto* content = lp.is_object() ? member(lp, "content") : nullptr;
  if (!content) return {};
  if (!content->is_array()) return wrong("choices[0].logprobs.content", "an array", *content);
  for (size_t i = 0; i < content->as_array().size(); ++i) {
    const auto& e = content->as_array()[i];
    const std::string at = "choices[0].logprobs.content[" + std::to_string(i) + "]";
    const auto* logprob = e.is_object() ? member(e, "logprob") : nullptr;
    if (!logprob || !logprob->is_number()) return missing(at + ".logprob");
    out.logprobs.push_back(static_cast<float>(logprob->as_double()));
    std::string text;
    if (const auto* bytes = member(e, "bytes"); bytes && bytes->is_array()) {
      for (const auto& b : bytes->as_array())
        if (b.is_integer() && b.as_integer() >= 0 && b.as_integer() < 256)
          text.push_back(static_cast<char>(b.as_integer()));
    } else if (const auto* token = member(e, "token"); token && token->is_string()) {
      text = token->as_string();
    }
    out.token_texts.push_back(std::move(text));
  }
  return {};
}

// The RL extension fields: on the choice (vLLM's token_ids) or at the top level (vLLM's
// prompt_token_ids); ours are written where vLLM writes them.
status read_extensions(const json_value& body, const json_value& choice, chat_response& out) {
  auto find = [&](std::string_view key) {
    const auto* v = member(choice, key);
    return v ? v : member(body, key);
  };
  if (const auto* ids = find("token_ids"))
    if (auto s = read_ids(*ids, "choices[0].token_ids", out.token_ids); !s) return s;
  if (const auto* ids = find("prompt_token_ids"))
    if (auto s = read_ids(*ids, "prompt_token_ids", out.prompt_token_ids); !s) return s;
  if (const auto* v = find("policy_version")) {
    if (!v->is_integer() || v->as_integer() < 0) return wrong("policy_version", "a non-negative integer", *v);
    out.policy_version = static_cast<uint64_t>(v->as_integer());
  }
  if (const auto* raw = member(choice, "raw_text")) {
    if (!raw->is_string()) return wrong("choices[0].raw_text", "a string", *raw);
    out.raw_text = raw->as_string();
  } else {
    policy::chat_message msg{"assistant", out.content, out.tool_calls};
    out.raw_text = policy::render_assistant_body(msg);
  }
  return {};
}

status read_usage(const json_value& body, chat_response& out) {
  out.prompt_tokens = static_cast<int32_t>(out.prompt_token_ids.size());
  out.completion_tokens = static_cast<int32_t>(!out.token_ids.empty() ? out.token_ids.size() : out.logprobs.size());
  const auto* usage = member(body, "usage");
  if (!usage) return {};
  if (!usage->is_object()) return wrong("usage", "an object", *usage);
  if (const auto* p = member(*usage, "prompt_tokens"); p && p->is_integer())
    out.prompt_tokens = static_cast<int32_t>(p->as_integer());
  if (const auto* c = member(*usage, "completion_tokens"); c && c->is_integer())
    out.completion_tokens = static_cast<int32_t>(c->as_integer());
  return {};
}

}  // namespace

json_value chat_response_to_json(const chat_response& r, const response_meta& meta) {
  json_object choice{{"index", 0},
                     {"message", message_json(r)},
                     {"logprobs", meta.include_logprobs ? logprobs_json(r) : json_value()},
                     {"finish_reason", r.finish_reason},
                     {"token_ids", ids_json(r.token_ids)},
                     {"raw_text", policy::utf8_lossy(r.raw_text)}};
  json_object usage{{"prompt_tokens", static_cast<int64_t>(r.prompt_tokens)},
                    {"completion_tokens", static_cast<int64_t>(r.completion_tokens)},
                    {"total_tokens", static_cast<int64_t>(r.prompt_tokens) + r.completion_tokens}};
  return json_object{{"id", meta.id},
                     {"object", "chat.completion"},
                     {"created", meta.created},
                     {"model", r.model},
                     {"choices", json_array{std::move(choice)}},
                     {"usage", std::move(usage)},
                     {"prompt_token_ids", ids_json(r.prompt_token_ids)},
                     {"policy_version", static_cast<int64_t>(r.policy_version)}};
}

result<chat_response> chat_response_from_json(const json_value& body) {
  if (!body.is_object()) return wrong("(body)", "a JSON object", body);
  chat_response out;
  if (const auto* id = member(body, "id"); id && id->is_string()) out.id = id->as_string();
  if (const auto* model = member(body, "model"); model && model->is_string()) out.model = model->as_string();
  const auto* choices = member(body, "choices");
  if (!choices) return missing("choices");
  if (!choices->is_array()) return wrong("choices", "an array", *choices);
  if (choices->as_array().empty()) return missing("choices[0]", "the array is empty");
  const auto& choice = choices->as_array().front();
  if (!choice.is_object()) return wrong("choices[0]", "an object", choice);
  const auto* message = member(choice, "message");
  if (!message) return missing("choices[0].message");
  if (!message->is_object()) return wrong("choices[0].message", "an object", *message);
  if (const auto* content = member(*message, "content")) {
    if (!content->is_string()) return wrong("choices[0].message.content", "a string or null", *content);
    out.content = content->as_string();
  }
  if (const auto* calls = member(*message, "tool_calls"))
    if (auto s = read_tool_calls(*calls, out); !s) return s.error();
  if (const auto* reason = member(choice, "finish_reason")) {
    if (!reason->is_string()) return wrong("choices[0].finish_reason", "a string or null", *reason);
    out.finish_reason = reason->as_string();
  }
  if (const auto* lp = member(choice, "logprobs"))
    if (auto s = read_logprobs(*lp, out); !s) return s.error();
  if (auto s = read_extensions(body, choice, out); !s) return s.error();
  if (auto s = read_usage(body, out); !s) return s.error();
  return out;
}

json_value error_to_json(const serving_error& error) {
  const char* type = error.code == errc::bad_request || error.code == errc::too_large ? "invalid_request_error"
                     : error.code == errc::unauthorized                               ? "authentication_error"
                     : error.code == errc::not_found                                  ? "not_found_error"
                     : error.code == errc::busy || error.code == errc::unavailable    ? "service_unavailable_error"
                                                                                      : "server_error";
  return json_object{{"error", json_object{{"message", policy::utf8_lossy(error.message)},
                                           {"type", type},
                                           {"param", error.param.empty() ? json_value() : json_value(error.param)},
                                           {"code", errc_name(error.code)}}}};
}

std::string error_message_from_body(std::string_view body) {
  if (auto parsed = policy::parse_json(body)) {
    const json_value& v = parsed.value();
    const json_value* err = member(v, "error");
    if (err && err->is_string()) return err->as_string();
    for (const json_value* obj : {err, &v}) {
      if (!obj) continue;
      for (const char* key : {"message", "detail"})
        if (const auto* m = member(*obj, key)) return m->is_string() ? m->as_string() : policy::dump_json(*m);
    }
  }
  // Rationale: enough of an HTML error page or a proxy's text to recognise it, not a flood.
  constexpr size_t max_excerpt = 300;
  std::string excerpt = policy::utf8_lossy(body.substr(0, max_excerpt));
  return body.size() > max_excerpt ? excerpt + "..." : excerpt;
}

}  // namespace caf_agent::serving
