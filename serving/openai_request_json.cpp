// serving/openai_request_json.cpp: chat requests to and from OpenAI JSON (openai_json.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include "serving/openai_json.hpp"

namespace caf_agent::serving {

using policy::json_array;
using policy::json_kind_name;
using policy::json_object;
using policy::json_value;

namespace {

// Rationale: the stop-string check runs after every sampled token; a bound keeps it cheap.
constexpr size_t max_stop_strings = 16;

serving_error bad(const std::string& field, const std::string& what) {
  return make_serving_error(errc::bad_request, field + ": " + what, field);
}

std::string got(const json_value& v) {
  return std::string(", got ") + json_kind_name(v.kind());
}

// The member, or nullptr when absent or null (OpenAI clients send null for "not set").
const json_value* member(const json_value& obj, std::string_view key) {
  const auto* v = obj.find(key);
  return v && !v->is_null() ? v : nullptr;
}

// Text content: a string, or OpenAI's array of {"type": "text", "text": ...} parts.
result<std::string> read_content(const json_value& v, const std::string& where) {
  if (v.is_string()) return v.as_string();
  if (!v.is_array()) return bad(where, "expected a string, an array of text parts or null" + got(v));
  std::string out;
  for (size_t i = 0; i < v.as_array().size(); ++i) {
    const auto& part = v.as_array()[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    const auto* type = part.find("type");
    const auto* text = part.find("text");
    if (!part.is_object() || !type || !type->is_string() || type->as_string() != "text")
      return bad(at, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    if (!text || !text->is_string()) return bad(at + ".text", "expected a string");
    // Rationale: vLLM joins text parts with a newline; the same prompt renders the same way.
    if (i > 0) out += "\n";
    out += text->as_string();
  }
  return out;
}

result<policy::tool_call> read_tool_call(const json_value& v, const std::string& where, std::string& id) {
  if (!v.is_object()) return bad(where, "expected an object" + got(v));
  if (const auto* i = member(v, "id")) {
    if (!i->is_string()) return bad(where + ".id", "expected a string" + got(*i));
    id = i->as_string();
  }
  if (const auto* t = member(v, "type"); t && (!t->is_string() || t->as_string() != "function"))
    return bad(where + ".type", "only \"function\" is supported");
  const auto* fn = member(v, "function");
  if (!fn || !fn->is_object()) return bad(where + ".function", "required (an object with name and arguments)");
  const auto* name = member(*fn, "name");
  if (!name || !name->is_string() || name->as_string().empty())
    return bad(where + ".function.name", "required (a non-empty string)");
  policy::tool_call call{name->as_string(), json_object{}};
  if (const auto* args = member(*fn, "arguments")) {
    if (args->is_string()) {
      // OpenAI sends arguments as a JSON string; parsed, they render as the Qwen template
      // renders a dict. Text that is not JSON is kept verbatim (it renders as written).
      auto parsed = policy::parse_json(args->as_string());
      call.arguments = parsed ? std::move(parsed).value() : *args;
    } else if (args->is_object()) {
      call.arguments = *args;
    } else {
      return bad(where + ".function.arguments", "expected a JSON string or an object" + got(*args));
    }
  }
  return call;
}

result<chat_message> read_message(const json_value& v, const std::string& where) {
  if (!v.is_object()) return bad(where, "expected an object" + got(v));
  chat_message msg;
  const auto* role = member(v, "role");
  if (!role || !role->is_string()) return bad(where + ".role", "required (a string)");
  msg.role = role->as_string();
  // Rationale: OpenAI's newer "developer" role is the system message of older models.
  if (msg.role == "developer") msg.role = "system";
  if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
    return bad(where + ".role", "unknown role '" + msg.role + "' (system, user, assistant, tool)");
  if (const auto* c = member(v, "content")) {
    auto content = read_content(*c, where + ".content");
    if (!content) return content.error();
    msg.content = std::move(content).value();
  } else if (msg.role != "assistant") {
    return bad(where + ".content", "required for role " + msg.role);
  }
  if (const auto* calls = member(v, "tool_calls")) {
    if (msg.role != "assistant") return bad(where + ".tool_calls", "only assistant messages have tool calls");
    if (!calls->is_array()) return bad(where + ".tool_calls", "expected an array" + got(*calls));
    for (size_t k = 0; k < calls->as_array().size(); ++k) {
      std::string id;
      auto call = read_tool_call(calls->as_array()[k], where + ".tool_calls[" + std::to_string(k) + "]", id);
      if (!call) return call.error();
      msg.tool_calls.push_back(std::move(call).value());
      msg.tool_call_ids.push_back(std::move(id));
    }
  }
  if (const auto* id = member(v, "tool_call_id")) {
    if (!id->is_string()) return bad(where + ".tool_call_id", "expected a string" + got(*id));
    msg.tool_call_id = id->as_string();
  }
  return msg;
}

status read_tools(const json_value& v, json_array& out) {
  if (!v.is_array()) return bad("tools", "expected an array" + got(v));
  for (size_t i = 0; i < v.as_array().size(); ++i) {
    const auto& tool = v.as_array()[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) return bad(at, "expected an object" + got(tool));
    if (const auto* t = member(tool, "type"); t && (!t->is_string() || t->as_string() != "function"))
      return bad(at + ".type", "only \"function\" is supported");
    const auto* fn = member(tool, "function");
    if (!fn || !fn->is_object()) return bad(at + ".function", "required (an object)");
    const auto* name = member(*fn, "name");
    if (!name || !name->is_string() || name->as_string().empty())
      return bad(at + ".function.name", "required (a non-empty string)");
    if (const auto* p = member(*fn, "parameters"); p && !p->is_object())
      return bad(at + ".function.parameters", "expected an object" + got(*p));
    out.push_back(tool);
  }
  return {};
}

// A finite number in [lo, hi] (lo excluded when lo_open).
status read_number(const json_value& body, const char* key, double lo, bool lo_open, double hi, float& out) {
  const auto* v = member(body, key);
  if (!v) return {};
  if (!v->is_number()) return bad(key, "expected a number" + got(*v));
  const double d = v->as_double();
  if (!std::isfinite(d) || d < lo || (lo_open && d == lo) || d > hi) {
    std::string range = (lo_open ? "(" : "[") + policy::dump_json(lo) + ", " + policy::dump_json(hi) + "]";
    return bad(key, "must be in " + range + ", got " + policy::dump_json(*v));
  }
  out = static_cast<float>(d);
  return {};
}

status read_int(const json_value& body, const char* key, int64_t lo, int64_t hi, int64_t& out, bool& present) {
  const auto* v = member(body, key);
  present = v != nullptr;
  if (!v) return {};
  if (!v->is_integer()) return bad(key, "expected an integer" + got(*v));
  if (v->as_integer() < lo || v->as_integer() > hi)
    return bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                        std::to_string(v->as_integer()));
  out = v->as_integer();
  return {};
}

status read_stop(const json_value& body, std::vector<std::string>& out) {
  const auto* v = member(body, "stop");
  if (!v) return {};
  if (v->is_string()) {
    if (!v->as_string().empty()) out.push_back(v->as_string());
    return {};
  }
  if (!v->is_array()) return bad("stop", "expected a string or an array of strings" + got(*v));
  if (v->as_array().size() > max_stop_strings)
    return bad("stop", "at most " + std::to_string(max_stop_strings) + " stop strings");
  for (size_t i = 0; i < v->as_array().size(); ++i) {
    const auto& s = v->as_array()[i];
    if (!s.is_string()) return bad("stop[" + std::to_string(i) + "]", "expected a string" + got(s));
    if (!s.as_string().empty()) out.push_back(s.as_string());
  }
  return {};
}

// Values this server cannot honour are refused, so a client never silently gets less than
// it asked for.
status read_unsupported(const json_value& body, bool& logprobs) {
  if (const auto* v = member(body, "logprobs")) {
    if (!v->is_bool()) return bad("logprobs", "expected a boolean" + got(*v));
    logprobs = v->as_bool();
  }
  int64_t value = 0;
  bool present = false;
  if (auto s = read_int(body, "top_logprobs", 0, 20, value, present); !s) return s;
  if (present && value != 0)
    return bad("top_logprobs", "only 0 is supported (the sampled token's logprob is always returned)");
  if (auto s = read_int(body, "n", 1, 128, value, present); !s) return s;
  if (present && value != 1) return bad("n", "only n = 1 is supported, got " + std::to_string(value));
  if (const auto* v = member(body, "stream")) {
    if (!v->is_bool()) return bad("stream", "expected a boolean" + got(*v));
    if (v->as_bool()) return bad("stream", "streaming is not supported; send \"stream\": false");
  }
  return {};
}

status read_sampling(const json_value& body, chat_request& req) {
  // Rationale: OpenAI caps temperature at 2; 100 leaves room for experiments and still
  // rejects values that are surely a mistake.
  if (auto s = read_number(body, "temperature", 0, false, 100, req.temperature); !s) return s;
  if (auto s = read_number(body, "top_p", 0, true, 1, req.top_p); !s) return s;
  int64_t value = 0;
  bool present = false;
  // Rationale: vLLM's "off" is -1; it means the same as our 0.
  if (auto s = read_int(body, "top_k", -1, std::numeric_limits<int32_t>::max(), value, present); !s) return s;
  if (present) req.top_k = value < 0 ? 0 : static_cast<int32_t>(value);
  const int64_t max_int = std::numeric_limits<int32_t>::max();
  if (auto s = read_int(body, "max_tokens", 1, max_int, value, present); !s) return s;
  if (present) req.max_tokens = static_cast<int32_t>(value);
  // OpenAI's newer name wins over the deprecated max_tokens.
  if (auto s = read_int(body, "max_completion_tokens", 1, max_int, value, present); !s) return s;
  if (present) req.max_tokens = static_cast<int32_t>(value);
  if (auto s = read_int(body, "seed", 0, std::numeric_limits<int64_t>::max(), value, present); !s) return s;
  if (present) req.seed = static_cast<uint64_t>(value);
  return read_stop(body, req.stop);
}

json_value call_json(const policy::tool_call& call, const std::string& id) {
  const std::string args = call.arguments.is_string() ? call.arguments.as_string() : policy::dump_json(call.arguments);
  return json_object{
      {"id", id}, {"type", "function"}, {"function", json_object{{"name", call.name}, {"arguments", args}}}};
}

}  // namespace

json_value float_json(float v) {
  return json_value(static_cast<double>(v));
}

result<chat_request> chat_request_from_json(const json_value& body) {
  if (!body.is_object())
    return make_serving_error(
        errc::bad_request, std::string("the request body must be a JSON object, got ") + json_kind_name(body.kind()));
  chat_request req;
  if (const auto* m = member(body, "model")) {
    if (!m->is_string()) return bad("model", "expected a string" + got(*m));
    req.model = m->as_string();
  }
  const auto* msgs = member(body, "messages");
  if (!msgs) return bad("messages", "required (a non-empty array of messages)");
  if (!msgs->is_array()) return bad("messages", "expected an array" + got(*msgs));
  if (msgs->as_array().empty()) return bad("messages", "must not be empty");
  for (size_t i = 0; i < msgs->as_array().size(); ++i) {
    auto msg = read_message(msgs->as_array()[i], "messages[" + std::to_string(i) + "]");
    if (!msg) return msg.error();
    req.messages.push_back(std::move(msg).value());
  }
  if (const auto* tools = member(body, "tools"))
    if (auto s = read_tools(*tools, req.tools); !s) return s.error();
  if (auto s = read_sampling(body, req); !s) return s.error();
  if (auto s = read_unsupported(body, req.logprobs); !s) return s.error();
  return req;
}

json_value chat_request_to_json(const chat_request& request, const json_object& extra) {
  json_array messages;
  std::vector<std::string> open_ids;  // ids of the last assistant's calls not yet answered
  size_t next_open = 0;
  for (size_t i = 0; i < request.messages.size(); ++i) {
    const auto& m = request.messages[i];
    json_object out{{"role", m.role}};
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      out.emplace_back("content", m.content.empty() ? json_value() : json_value(m.content));
      json_array calls;
      open_ids.clear();
      next_open = 0;
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        std::string id = k < m.tool_call_ids.size() && !m.tool_call_ids[k].empty()
                             ? m.tool_call_ids[k]
                             : "call_" + std::to_string(i) + "_" + std::to_string(k);
        calls.push_back(call_json(m.tool_calls[k], id));
        open_ids.push_back(std::move(id));
      }
      out.emplace_back("tool_calls", std::move(calls));
    } else {
      out.emplace_back("content", m.content);
    }
    if (m.role == "tool") {
      std::string id = m.tool_call_id;
      if (id.empty()) id = next_open < open_ids.size() ? open_ids[next_open] : "call_" + std::to_string(i);
      ++next_open;
      out.emplace_back("tool_call_id", std::move(id));
    }
    messages.push_back(std::move(out));
  }
  json_object body{{"model", request.model}, {"messages", std::move(messages)}};
  if (!request.tools.empty()) body.emplace_back("tools", request.tools);
  body.emplace_back("temperature", float_json(request.temperature));
  body.emplace_back("top_p", float_json(request.top_p));
  // OpenAI itself refuses top_k; only send it when it means something.
  if (request.top_k > 0) body.emplace_back("top_k", static_cast<int64_t>(request.top_k));
  body.emplace_back("max_tokens", static_cast<int64_t>(request.max_tokens));
  if (!request.stop.empty()) {
    json_array stop;
    for (const auto& s : request.stop) stop.emplace_back(s);
    body.emplace_back("stop", std::move(stop));
  }
  if (request.seed)
    body.emplace_back("seed",
                      static_cast<int64_t>(*request.seed & static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
  if (request.logprobs) body.emplace_back("logprobs", true);
  for (const auto& [k, v] : extra) {
    auto it = std::find_if(body.begin(), body.end(), [&](const auto& m) { return m.first == k; });
    if (it != body.end())
      it->second = v;
    else
      body.emplace_back(k, v);
  }
  return body;
}

}  // namespace caf_agent::serving
