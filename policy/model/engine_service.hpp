#pragma once
// engine_service: a generation_engine driven by its own thread, for callers that are not the
// engine's thread (rollout actors, the HTTP server). submit() queues a request (bounded) and
// returns at once; the thread admits queued requests into the engine's batch, steps it while
// anything runs, and calls each request's callback with its result. Continuous batching comes
// from the engine: a request submitted while others decode joins the next step.
// No torch types in this header (pimpl), like engine.hpp.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "policy/model/engine.hpp"

namespace caf_agent::policy {

/// Options of engine_service::open.
struct service_options {
  engine_options engine;  ///< The engine to run.
  /// Requests queued or running at most; submit() beyond that fails with "busy" (backpressure).
  int32_t max_queued = 1024;
};

/// Counters of an engine_service (read at any time).
struct service_stats {
  uint64_t submitted = 0;         ///< Requests accepted by submit().
  uint64_t completed = 0;         ///< Callbacks called with a result.
  uint64_t failed = 0;            ///< Callbacks called with an error.
  uint64_t rejected = 0;          ///< submit() calls refused (busy, bad request, stopped).
  uint64_t steps = 0;             ///< Engine steps run.
  uint64_t generated_tokens = 0;  ///< Tokens in completed results.
  uint64_t batch_rows_total = 0;  ///< Sum over steps of the sequences running in that step.
  int64_t outstanding = 0;        ///< Requests accepted and not yet answered.
  engine_stats engine;            ///< The engine's own counters after its last step.
};

/// Called once per accepted request, on the service's thread: the result, or an error text
/// (a device error in a step, or the service stopping) with an empty result.
using service_callback = std::function<void(generation_result result, std::string error)>;

/// A generation engine on its own thread. All member functions are thread-safe.
class engine_service {
 public:
  /// Loads the model (engine_options) and starts the thread.
  static result<std::unique_ptr<engine_service>> open(const service_options& options);
  /// Stops the thread; requests not yet answered get the error "engine service stopped".
  ~engine_service();
  engine_service(const engine_service&) = delete;
  engine_service& operator=(const engine_service&) = delete;

  /// Queues a request. Fails at once (the callback is not called) when the service holds
  /// max_queued requests, or the request is invalid (empty prompt, prompt that leaves no room
  /// in the context, token ids outside the vocabulary, bad sampling values).
  status submit(generation_request request, service_callback done);

  /// Stages new weights (see generation_engine::load_weights); the next step uses them, so no
  /// step mixes two versions. Fails, changing nothing, on a bad checkpoint or an older version.
  status load_weights(const std::string& model_dir, uint64_t version);
  /// The weights version of the next step.
  uint64_t policy_version() const;
  /// The context limit in tokens (prompt plus generated).
  int32_t max_context() const;
  /// Tokens of KV storage (generation_engine::kv_capacity_tokens).
  int64_t kv_capacity_tokens() const;
  /// The model's vocabulary size.
  int32_t vocab_size() const;
  /// The largest batch the engine decodes together.
  int32_t max_batch() const;
  /// A snapshot of the counters.
  service_stats stats() const;

 private:
  struct impl;
  explicit engine_service(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

}  // namespace caf_agent::policy
