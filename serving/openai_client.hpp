#pragma once
// serving/openai_client.hpp: a blocking client of any OpenAI-compatible server (vLLM, SGLang,
// openai_server). Each call opens its own connection and io_context, so calls from several
// worker threads run in parallel; none touches a caller's event loop. Connection errors,
// timeouts, 429 and 5xx are retried with exponential backoff and jitter; other 4xx never are.
// No Beast types in this header.

#include <cstdint>
#include <string>
#include <vector>

#include "policy/text/json.hpp"
#include "serving/chat_types.hpp"
#include "serving/serving_result.hpp"

namespace caf_agent::serving {

/// Settings of openai_client.
struct client_options {
  /// The server's OpenAI base URL, "http://host:port/v1" (http only; https needs a proxy).
  std::string base_url;
  /// Sent as "Authorization: Bearer <api_key>" when non-empty.
  std::string api_key;
  /// The model name sent when a request leaves chat_request::model empty.
  std::string model;
  /// Time to resolve and connect, per attempt. Rationale: a LAN connect takes milliseconds;
  /// 5 s without one means the host is gone or unreachable.
  int64_t connect_timeout_ms = 5000;
  /// Time from sending the request to the end of the response, per attempt. Rationale: a
  /// 2048-token turn of a busy 7B server takes tens of seconds; 120 s means stuck.
  int64_t request_timeout_ms = 120000;
  /// Retries after the first attempt (0: no retry). Rationale: with the backoff below, 3
  /// retries ride out a server restart of a few seconds without hiding an outage for long.
  int32_t max_retries = 3;
  /// The first backoff; each retry doubles it up to backoff_max_ms. The wait is drawn
  /// uniformly from [b/2, b] (jitter) so that many clients do not retry in lockstep.
  /// Rationale: 250 ms is long enough for a momentarily full queue to drain.
  int64_t backoff_initial_ms = 250;
  /// The longest backoff (also caps a server's Retry-After).
  int64_t backoff_max_ms = 8000;
  /// Largest response accepted. Rationale: a response with logprobs and token ids of 32k
  /// tokens is about 4 MB; 64 MiB bounds memory against a broken server.
  uint64_t max_response_bytes = 64ull << 20;
  /// Members added to every chat request body (OpenAI's extra_body), e.g.
  /// {"return_token_ids": true} to get token ids from vLLM.
  policy::json_object extra_body;

  /// Checks the URL and ranges; errors name the field.
  status validate() const;
};

/// The parts of an http:// URL.
struct http_url {
  std::string host;    ///< Host name or address (without IPv6 brackets).
  uint16_t port = 80;  ///< Port.
  std::string path;    ///< Path without a trailing slash ("/v1", or "" for the root).
};

/// Parses "http://host[:port][/path]"; errors say what is wrong.
result<http_url> parse_http_url(const std::string& url);

/// A client of one server.
class openai_client {
 public:
  /// Checks the options (validate()).
  static result<openai_client> create(client_options options);

  /// POST {base}/chat/completions. Tool-call arguments come back parsed (a string when they
  /// are not JSON), logprobs and the token-id extension fields when the server sends them.
  result<chat_response> chat(const chat_request& request) const;

  /// POST {root}/update_weights_from_disk {"model_path", "version"}, where root is the base
  /// URL without its trailing "/v1" (SGLang's reload endpoint, also openai_server's).
  status reload(const std::string& model_path, uint64_t version) const;

  /// GET {base}/models: the ids of the served models.
  result<std::vector<std::string>> models() const;

  /// The options in use.
  const client_options& options() const { return options_; }

 private:
  struct http_answer {
    int status = 0;
    std::string body;
    int64_t retry_after_ms = -1;
  };
  openai_client(client_options options, http_url url);
  result<http_answer> call(const std::string& method, const std::string& path, const std::string& body) const;

  client_options options_;
  http_url url_;
};

}  // namespace caf_agent::serving
