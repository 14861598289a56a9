#pragma once
// serving/chat_service.hpp: what the OpenAI server calls to answer a chat completion. The real
// one is engine_chat_service (LibTorch engine); tests put a scripted one in its place.

#include <cstdint>
#include <functional>
#include <string>

#include "serving/chat_types.hpp"
#include "serving/serving_result.hpp"

namespace caf_agent::serving {

/// Called exactly once per complete() call, possibly on another thread.
using chat_handler = std::function<void(result<chat_response>)>;

/// Answers chat completions. Implementations are thread-safe: the server calls them from
/// several io threads at once.
class chat_service {
 public:
  /// Destroys the service; the server using it must be stopped first.
  virtual ~chat_service() = default;

  /// Starts one completion and returns without waiting; `done` gets the response or an error
  /// (bad_request for an invalid request, e.g. a prompt over the context; busy when the queue
  /// is full; internal for a device error). `done` may run on another thread, or inline.
  virtual void complete(chat_request request, chat_handler done) = 0;

  /// Switches to the checkpoint at model_path as weights version `version`; requests admitted
  /// afterwards use it. Blocks while the checkpoint is read.
  virtual status reload(const std::string& model_path, uint64_t version) = 0;

  /// The name /v1/models reports and responses carry.
  virtual std::string model_name() const = 0;
};

}  // namespace caf_agent::serving
