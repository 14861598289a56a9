// serving/openai_client.cpp: see openai_client.hpp. One attempt is an asynchronous
// resolve-connect-write-read chain on a private io_context with a deadline timer, which is how
// Asio gives a blocking call a timeout; call() wraps attempts in the retry policy.
#include "serving/openai_client.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <limits>
#include <random>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "serving/openai_json.hpp"

namespace caf_agent::serving {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using policy::json_object;
using policy::json_value;

namespace {

struct attempt_result {
  int status = 0;
  std::string body;
  int64_t retry_after_ms = -1;
};

int64_t parse_retry_after_ms(std::string_view value) {
  int64_t seconds = -1;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc() || seconds < 0) return -1;  // an HTTP date: ignored, the backoff applies
  return seconds * 1000;
}

serving_error transport_error(const beast::error_code& ec, std::string_view stage) {
  if (ec == http::error::body_limit)
    return make_serving_error(errc::protocol, "the response is larger than max_response_bytes");
  if (stage == "resolve") return make_serving_error(errc::unavailable, "cannot resolve the host: " + ec.message());
  if (ec == net::error::connection_refused) return make_serving_error(errc::unavailable, "connection refused");
  if (stage == "connect") return make_serving_error(errc::unavailable, "cannot connect: " + ec.message());
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::broken_pipe)
    return make_serving_error(
        errc::unavailable, "the server closed the connection before the response was complete (" + ec.message() + ")");
  if (ec.category() == http::make_error_code(http::error::end_of_stream).category())  // HTTP parse errors
    return make_serving_error(errc::protocol, "malformed HTTP response: " + ec.message());
  return make_serving_error(errc::unavailable, std::string(stage) + " failed: " + ec.message());
}

// One request on a fresh connection, bounded by the connect and request timeouts.
result<attempt_result> attempt(const http_url& url, const client_options& o, http::verb verb, const std::string& target,
                               const std::string& body) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  net::steady_timer deadline(ioc);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(o.max_response_bytes);
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, url.port == 80 ? url.host : url.host + ":" + std::to_string(url.port));
  req.set(http::field::user_agent, "caf-agent");
  req.set(http::field::accept, "application/json");
  if (!o.api_key.empty()) req.set(http::field::authorization, "Bearer " + o.api_key);
  if (verb == http::verb::post) req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.keep_alive(false);
  req.prepare_payload();

  bool connected = false, timed_out = false, done = false;
  beast::error_code failure;
  std::string_view stage;
  auto arm = [&](int64_t ms) {
    deadline.expires_after(std::chrono::milliseconds(ms));  // cancels the previous wait
    deadline.async_wait([&](beast::error_code ec) {
      if (ec || done) return;
      timed_out = true;
      resolver.cancel();
      beast::error_code ignored;
      stream.socket().close(ignored);
    });
  };
  auto finish = [&](beast::error_code ec, std::string_view what) {
    failure = ec;
    stage = what;
    done = true;
    deadline.cancel();
  };
  arm(o.connect_timeout_ms);
  resolver.async_resolve(
      url.host, std::to_string(url.port), [&](beast::error_code ec, tcp::resolver::results_type eps) {
        if (ec) return finish(ec, "resolve");
        stream.async_connect(eps, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) return finish(ec, "connect");
          connected = true;
          arm(o.request_timeout_ms);
          http::async_write(stream, req, [&](beast::error_code ec, size_t) {
            if (ec) return finish(ec, "send");
            http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) { finish(ec, "receive"); });
          });
        });
      });
  ioc.run();

  if (timed_out)
    return make_serving_error(errc::timeout, connected
                                                 ? "timed out after " + std::to_string(o.request_timeout_ms) +
                                                       " ms waiting for the response (request_timeout_ms)"
                                                 : "connect timed out after " + std::to_string(o.connect_timeout_ms) +
                                                       " ms (connect_timeout_ms)");
  if (failure) return transport_error(failure, stage);
  auto& res = parser.get();
  const auto retry_after = res[http::field::retry_after];
  return attempt_result{static_cast<int>(res.result_int()), std::move(res.body()),
                        parse_retry_after_ms(std::string_view(retry_after.data(), retry_after.size()))};
}

int64_t backoff_ms(const client_options& o, int32_t retry, int64_t retry_after_ms) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  double b = static_cast<double>(o.backoff_initial_ms);
  for (int32_t i = 0; i < retry && b < static_cast<double>(o.backoff_max_ms); ++i) b *= 2;
  b = std::min(b, static_cast<double>(o.backoff_max_ms));
  auto wait = static_cast<int64_t>(std::uniform_real_distribution<double>(b / 2, b)(rng));
  if (retry_after_ms >= 0) wait = std::max(wait, std::min(retry_after_ms, o.backoff_max_ms));
  return wait;
}

serving_error with_context(serving_error e, const std::string& what) {
  e.message = what + ": " + e.message;
  return e;
}

}  // namespace

status client_options::validate() const {
  auto bad = [](const std::string& field, const std::string& what) {
    return make_serving_error(errc::bad_request, "client_options." + field + ": " + what, field);
  };
  if (auto url = parse_http_url(base_url); !url) return bad("base_url", url.error().message);
  if (connect_timeout_ms < 1) return bad("connect_timeout_ms", "must be positive");
  if (request_timeout_ms < 1) return bad("request_timeout_ms", "must be positive");
  if (max_retries < 0 || max_retries > 100) return bad("max_retries", "must be in [0, 100]");
  if (backoff_initial_ms < 0) return bad("backoff_initial_ms", "must be >= 0");
  if (backoff_max_ms < backoff_initial_ms) return bad("backoff_max_ms", "must be >= backoff_initial_ms");
  if (max_response_bytes < 1024) return bad("max_response_bytes", "must be at least 1024");
  return {};
}

result<http_url> parse_http_url(const std::string& url) {
  auto bad = [&](const std::string& what) { return make_serving_error(errc::bad_request, "'" + url + "': " + what); };
  constexpr std::string_view scheme = "http://";
  if (url.rfind("https://", 0) == 0) return bad("https is not supported; use http:// (or a local TLS proxy)");
  if (url.rfind(scheme, 0) != 0) return bad("expected http://host[:port][/path]");
  std::string_view rest(url);
  rest.remove_prefix(scheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos) return bad("a base URL has no query or fragment");
  http_url out;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 address");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad("unexpected text after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return bad("missing host");
  if (!port.empty() || authority.find(':') != std::string_view::npos) {
    unsigned value = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || p != port.data() + port.size() || value == 0 || value > 65535)
      return bad("invalid port '" + std::string(port) + "'");
    out.port = static_cast<uint16_t>(value);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.path = std::string(path);
  return out;
}

result<openai_client> openai_client::create(client_options options) {
  if (auto valid = options.validate(); !valid) return valid.error();
  auto url = parse_http_url(options.base_url);
  return openai_client(std::move(options), std::move(url).value());
}

openai_client::openai_client(client_options options, http_url url)
    : options_(std::move(options)), url_(std::move(url)) {}

result<openai_client::http_answer> openai_client::call(const std::string& method, const std::string& path,
                                                       const std::string& body) const {
  const bool v6 = url_.host.find(':') != std::string::npos;
  const std::string what =
      method + " http://" + (v6 ? "[" + url_.host + "]" : url_.host) + ":" + std::to_string(url_.port) + path;
  const auto verb = method == "POST" ? http::verb::post : http::verb::get;
  for (int32_t retry = 0;; ++retry) {
    auto r = attempt(url_, options_, verb, path.empty() ? "/" : path, body);
    serving_error err;
    int64_t retry_after = -1;
    if (r && r->status >= 200 && r->status < 300) return http_answer{r->status, std::move(r->body), r->retry_after_ms};
    if (r) {
      err = make_serving_error(errc_of_http_status(r->status),
                               "HTTP " + std::to_string(r->status) + ": " + error_message_from_body(r->body));
      // Rationale: any other 4xx says the request itself is wrong; sent again, it fails again.
      if (r->status >= 400 && r->status < 500 && r->status != 429) return with_context(err, what);
      retry_after = r->retry_after_ms;
    } else {
      err = r.error();
    }
    if (!err.retryable() || retry >= options_.max_retries) {
      if (retry > 0) err.message += " (" + std::to_string(retry + 1) + " attempts)";
      return with_context(err, what);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms(options_, retry, retry_after)));
  }
}

result<chat_response> openai_client::chat(const chat_request& request) const {
  chat_request req = request;
  if (req.model.empty()) req.model = options_.model;
  const std::string path = url_.path + "/chat/completions";
  auto answer = call("POST", path, policy::dump_json(chat_request_to_json(req, options_.extra_body)));
  if (!answer) return answer.error();
  const std::string what = "POST " + options_.base_url + "/chat/completions";
  auto parsed = policy::parse_json(answer->body);
  if (!parsed)
    return make_serving_error(errc::protocol, what + ": malformed JSON in the response: " + parsed.error().message);
  auto response = chat_response_from_json(parsed.value());
  if (!response) return with_context(response.error(), what + ": unexpected response");
  return response;
}

status openai_client::reload(const std::string& model_path, uint64_t version) const {
  std::string root = url_.path;
  if (root.size() >= 3 && root.compare(root.size() - 3, 3, "/v1") == 0) root.resize(root.size() - 3);
  json_object body{
      {"model_path", model_path},
      {"version", static_cast<int64_t>(version & static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))}};
  auto answer = call("POST", root + "/update_weights_from_disk", policy::dump_json(body));
  if (!answer) return answer.error();
  auto parsed = policy::parse_json(answer->body);
  const json_value* ok = parsed ? parsed->find("success") : nullptr;
  if (ok && ok->is_bool() && !ok->as_bool())
    return make_serving_error(errc::bad_request,
                              "reload of " + model_path + " refused: " + error_message_from_body(answer->body));
  return {};
}

result<std::vector<std::string>> openai_client::models() const {
  auto answer = call("GET", url_.path + "/models", {});
  if (!answer) return answer.error();
  auto parsed = policy::parse_json(answer->body);
  if (!parsed) return make_serving_error(errc::protocol, "GET /models: malformed JSON: " + parsed.error().message);
  const json_value* data = parsed->find("data");
  if (!data || !data->is_array()) return make_serving_error(errc::protocol, "GET /models: missing field data");
  std::vector<std::string> ids;
  for (const auto& m : data->as_array())
    if (const auto* id = m.find("id"); id && id->is_string()) ids.push_back(id->as_string());
  return ids;
}

}  // namespace caf_agent::serving
