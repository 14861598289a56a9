// serving/openai_routes.cpp: see openai_routes.hpp.
#include "serving/openai_routes.hpp"

#include <chrono>
#include <exception>
#include <memory>
#include <string_view>

#include "serving/openai_json.hpp"

namespace caf_agent::serving {

using policy::json_array;
using policy::json_object;
using policy::json_value;

namespace {

struct route {
  std::string_view path;
  std::string_view method;
};

constexpr route routes[] = {
    {"/v1/chat/completions", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"}, {"/update_weights_from_disk", "POST"}};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

http_reply json_reply(int status, const json_value& body) {
  return {status, policy::dump_json(body), {}};
}

std::string path_of(const std::string& target) {
  std::string path = target.substr(0, target.find('?'));
  if (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// A reply that goes out once even if a faulty service calls back twice.
reply_handler once(reply_handler reply) {
  auto called = std::make_shared<std::atomic<bool>>(false);
  return [called, reply = std::move(reply)](http_reply r) {
    if (!called->exchange(true)) reply(std::move(r));
  };
}

}  // namespace

openai_routes::openai_routes(chat_service& service, std::string api_key)
    : service_(service), api_key_(std::move(api_key)), started_(unix_now()) {}

http_reply openai_routes::error_reply(const serving_error& error) {
  return json_reply(http_status_of(error.code), error_to_json(error));
}

void openai_routes::handle(const http_request& request, reply_handler reply, io_runner on_io) {
  reply = once(std::move(reply));
  const std::string path = path_of(request.target);
  const route* found = nullptr;
  for (const auto& r : routes)
    if (r.path == path) found = &r;
  if (!found) {
    std::string known;
    for (const auto& r : routes)
      known += (known.empty() ? "" : ", ") + std::string(r.method) + " " + std::string(r.path);
    reply(error_reply(make_serving_error(errc::not_found, "unknown path '" + path + "' (endpoints: " + known + ")")));
    return;
  }
  if (request.method != found->method) {
    auto r =
        error_reply(make_serving_error(errc::method_not_allowed, "method " + request.method + " is not allowed on " +
                                                                     path + "; use " + std::string(found->method)));
    r.allow = std::string(found->method);
    reply(std::move(r));
    return;
  }
  // Rationale: load balancers probe /health without credentials.
  if (!api_key_.empty() && path != "/health" && request.authorization != "Bearer " + api_key_) {
    reply(error_reply(make_serving_error(errc::unauthorized, request.authorization.empty()
                                                                 ? "missing Authorization: Bearer <api key>"
                                                                 : "invalid API key")));
    return;
  }
  try {
    if (path == "/v1/chat/completions") return chat(request.body, reply, std::move(on_io));
    if (path == "/update_weights_from_disk") return update_weights(request.body, reply);
    if (path == "/v1/models") return reply(models());
    reply(json_reply(200, json_object{{"status", "ok"}, {"model", service_.model_name()}}));
  } catch (const std::exception& e) {
    // A service that throws is a bug there; the connection still gets an answer.
    reply(error_reply(make_serving_error(errc::internal, std::string("internal error: ") + e.what())));
  }
}

void openai_routes::chat(const std::string& body, reply_handler reply, io_runner on_io) {
  auto parsed = policy::parse_json(body);
  if (!parsed) {
    reply(error_reply(
        make_serving_error(errc::bad_request, "the request body is not valid JSON: " + parsed.error().message)));
    return;
  }
  auto request = chat_request_from_json(parsed.value());
  if (!request) {
    reply(error_reply(request.error()));
    return;
  }
  response_meta meta{"chatcmpl-" + std::to_string(started_) + "-" + std::to_string(next_response_++), unix_now(),
                     request->logprobs};
  auto respond = [this, meta, model = service_.model_name(), reply](result<chat_response> r) {
    if (!r) return reply(error_reply(r.error()));
    chat_response& response = r.value();
    if (response.model.empty()) response.model = model;
    response.tool_call_ids.resize(response.tool_calls.size());
    for (auto& id : response.tool_call_ids)
      if (id.empty()) id = "call_" + std::to_string(next_call_++);
    reply(json_reply(200, chat_response_to_json(response, meta)));
  };
  service_.complete(std::move(request).value(), [respond, on_io](result<chat_response> r) {
    if (!on_io) return respond(std::move(r));
    on_io([respond, r = std::move(r)]() mutable { respond(std::move(r)); });
  });
}

void openai_routes::update_weights(const std::string& body, reply_handler reply) {
  auto fail = [&](int status, const std::string& message) {
    reply(json_reply(status, json_object{{"success", false}, {"message", message}}));
  };
  auto parsed = policy::parse_json(body);
  if (!parsed) return fail(400, "the request body is not valid JSON: " + parsed.error().message);
  const auto* path = parsed->find("model_path");
  if (!path || !path->is_string() || path->as_string().empty())
    return fail(400, "model_path: required (a non-empty string)");
  const auto* version = parsed->find("version");
  if (!version || !version->is_integer() || version->as_integer() < 0)
    return fail(400, "version: required (an integer >= 0)");
  auto loaded = service_.reload(path->as_string(), static_cast<uint64_t>(version->as_integer()));
  if (!loaded) return fail(http_status_of(loaded.error().code), loaded.error().message);
  reply(json_reply(200, json_object{{"success", true},
                                    {"message", "loaded " + path->as_string() + " as version " +
                                                    std::to_string(version->as_integer())}}));
}

http_reply openai_routes::models() const {
  json_object model{
      {"id", service_.model_name()}, {"object", "model"}, {"created", started_}, {"owned_by", "caf-agent"}};
  return json_reply(200, json_object{{"object", "list"}, {"data", json_array{std::move(model)}}});
}

}  // namespace caf_agent::serving
