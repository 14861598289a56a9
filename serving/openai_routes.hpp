#pragma once
// serving/openai_routes.hpp: the server's endpoints over plain request / reply values, apart
// from the socket code (openai_server.cpp), so each endpoint reads as unpack, call, reply.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "serving/chat_service.hpp"
#include "serving/serving_result.hpp"

namespace caf_agent::serving {

/// The parts of an HTTP request the endpoints look at.
struct http_request {
  std::string method;         ///< "GET", "POST", ...
  std::string target;         ///< Path and query, e.g. "/v1/models?x=1".
  std::string authorization;  ///< The Authorization header, if any.
  std::string body;           ///< The request body.
};

/// An answer: status, JSON body, and the Allow header for 405.
struct http_reply {
  int status = 200;   ///< HTTP status code.
  std::string body;   ///< JSON text.
  std::string allow;  ///< Allowed method (405 only).
};

/// Receives the reply; called exactly once, possibly on the service's thread.
using reply_handler = std::function<void(http_reply)>;

/// Runs a task on one of the server's io threads; the routes move work there that would
/// otherwise run on the service's thread (JSON of a response: the engine's loop must not wait).
using io_runner = std::function<void(std::function<void()>)>;

/// The endpoints of openai_server.
class openai_routes {
 public:
  /// `api_key` empty: no authorization required.
  openai_routes(chat_service& service, std::string api_key);

  /// Answers one request; `reply` may run before this returns or later on another thread.
  /// `on_io` (may be empty: then inline) receives the response's serialization.
  void handle(const http_request& request, reply_handler reply, io_runner on_io = {});

  /// An OpenAI error object with the status of its code.
  static http_reply error_reply(const serving_error& error);

 private:
  void chat(const std::string& body, reply_handler reply, io_runner on_io);
  void update_weights(const std::string& body, reply_handler reply);
  http_reply models() const;

  chat_service& service_;
  std::string api_key_;
  int64_t started_ = 0;
  std::atomic<uint64_t> next_response_{1};
  std::atomic<uint64_t> next_call_{0};
};

}  // namespace caf_agent::serving
