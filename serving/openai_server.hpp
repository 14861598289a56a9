#pragma once
// serving/openai_server.hpp: an OpenAI-compatible HTTP/1.1 server (Boost.Beast) in front of a
// chat_service. Endpoints:
//   POST /v1/chat/completions      OpenAI chat completion (+ token_ids, prompt_token_ids,
//                                  raw_text, policy_version extension fields)
//   GET  /v1/models                the served model
//   GET  /health                   {"status": "ok"}
//   POST /update_weights_from_disk {"model_path", "version"} -> {"success", "message"}
//                                  (SGLang's reload call)
// Errors are OpenAI error objects with 400/401/404/405/413/500/503. Bad input of any kind gets
// an answer or a closed connection, never a crash. No Beast types in this header.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serving/chat_service.hpp"
#include "serving/serving_result.hpp"

namespace caf_agent::serving {

/// Settings of openai_server.
struct server_options {
  /// The address to listen on; "0.0.0.0" for all interfaces.
  std::string host = "127.0.0.1";
  /// The port; 0 picks a free one (openai_server::port() reports it).
  uint16_t port = 0;
  /// Threads running the connections. Rationale: requests wait on the service without a
  /// thread; a few threads suffice for parsing and JSON, one more covers a blocking reload.
  int32_t io_threads = 4;
  /// Largest request body. Rationale: a 200-turn conversation with 30 KB tool outputs is
  /// about 6 MB; 32 MiB leaves room and still bounds memory per connection.
  uint64_t max_body_bytes = 32ull << 20;
  /// Time to receive one request (headers and body) and, on a kept-alive connection, to wait
  /// for the next one. Rationale: bounds what a stalled or idle client holds.
  int64_t read_timeout_ms = 60000;
  /// Open connections at most; more are answered 503 and closed. Rationale: each holds a
  /// socket and buffers, and the process has a limited number of file descriptors.
  int32_t max_connections = 1024;
  /// When non-empty, requests must carry "Authorization: Bearer <api_key>" (else 401).
  std::string api_key;

  /// Checks ranges; errors name the field.
  status validate() const;
};

/// A running server. The chat_service must outlive it; a response the service delivers
/// after stop() is dropped.
class openai_server {
 public:
  /// Binds, listens and starts the io threads; fails (unavailable) when the address cannot
  /// be bound, naming it.
  static result<std::unique_ptr<openai_server>> start(chat_service& service, const server_options& options);
  /// Stops (see stop()).
  ~openai_server();
  openai_server(const openai_server&) = delete;
  openai_server& operator=(const openai_server&) = delete;

  /// Stops accepting, closes every connection and joins the io threads. Idempotent.
  void stop();
  /// The bound port (the ephemeral one when options.port was 0).
  uint16_t port() const;
  /// "http://<host>:<port>/v1", what an OpenAI client takes as its base URL.
  std::string base_url() const;

  /// The state the connections share (openai_server.cpp); public only so they can name it.
  struct core;

 private:
  explicit openai_server(std::shared_ptr<core> core);
  std::shared_ptr<core> core_;
  std::vector<std::thread> threads_;
};

}  // namespace caf_agent::serving
