#pragma once
/// gpu_pool/worker_process.hpp: owns one persistent Python eval worker (Boost.Process):
/// spawn, request with a deadline, kill-and-restart on deadline or crash.

#include "gpu_pool/worker_protocol.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace caf_agent::gpu_pool {

/// How to start a worker; `validate()` before use.
struct worker_config {
  std::string python = "python3";                  ///< interpreter (the venv's python)
  std::string package_dir = "skills/eval_worker";  ///< PYTHONPATH entry holding caf_agent_eval
  std::string device = "cpu";                      ///< "cpu" or "cuda:N"
  int threads = 0;                                 ///< torch threads (0: torch's default)
  std::map<std::string, std::string> env;          ///< extra environment (e.g. CAF_EVAL_BUILD_ROOT)
  std::string stderr_path;                         ///< file for the worker's stderr; empty: discard
  /// A builder (--build-only): answers build requests only; no device context, no children.
  bool build_only = false;
  /// Rationale: the worker imports torch and pre-starts a child that imports it again;
  /// on a loaded 2-core machine that takes up to a minute.
  std::chrono::milliseconds start_timeout{std::chrono::seconds(120)};

  /// Empty when usable, else what is wrong (names the field).
  std::optional<std::string> validate() const;
};

/// Why an evaluation produced no response from the worker.
enum class worker_error_code {
  start_failed,    ///< the worker did not start or answer ping (infrastructure; retry may help)
  timeout,         ///< no response before the deadline; the worker was killed and restarted
  crashed,         ///< the worker died mid-request (e.g. SIGSEGV); restarted
  protocol_error,  ///< the worker sent a malformed frame; restarted
};

/// An expected failure, as a value.
struct worker_failure {
  worker_error_code code = worker_error_code::start_failed;  ///< what happened
  std::string message;                                       ///< human-readable detail (exit signal, deadline)
  bool restarted = false;                                    ///< a fresh worker is running again
  // Whose fault it is and whether a retry helps: gpu_pool/judgement (outcome_of, judge).
};

/// The result of evaluate(): a response, or a failure.
struct eval_outcome {
  std::optional<eval_response> response;  ///< set on success
  std::optional<worker_failure> failure;  ///< set on failure
  /// Set when the worker had died between jobs (operator, OOM killer) and was
  /// restarted before this job: how it ended. The job itself ran normally.
  std::string died_while_idle;
};

/// The result of build(): a response, or a failure (a hung compiler is killed by the worker
/// itself at the request's timeout_s; `deadline` is the backstop for a hung worker).
struct build_outcome {
  std::optional<build_response> response;  ///< set on success
  std::optional<worker_failure> failure;   ///< set on failure
  std::string died_while_idle;             ///< as in eval_outcome
};

/// One worker process. Blocking API: run it on a detached actor or its own thread.
class worker_process {
 public:
  /// Takes a validated config; nothing starts until start() or the first evaluate().
  explicit worker_process(worker_config cfg);
  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  /// Starts the worker and waits for its ping; a failure is start_failed.
  std::optional<worker_failure> start();

  /// Sends one request and waits up to `deadline` for the response.
  eval_outcome evaluate(const eval_request& req, std::chrono::milliseconds deadline);

  /// Sends one build request and waits up to `deadline` for the response.
  build_outcome build(const build_request& req, std::chrono::milliseconds deadline);

  /// Sends any op map (as msgpack) and returns the raw response payload (tests, ping).
  std::optional<std::string> call(const std::string& payload, std::chrono::milliseconds deadline,
                                  worker_failure* failure);

  /// True while a worker process is alive.
  bool running() const;
  /// How many times the worker was restarted after a timeout or a crash.
  int restarts() const { return restarts_; }
  /// Process id of the current worker (0 when none).
  int pid() const;
  /// Stops the worker (shutdown request, then kill).
  void stop();

  /// Safe from any thread: no more restarts, and the current worker is killed,
  /// so an evaluate() blocked in another thread returns at once (shutdown).
  void abort();

 private:
  struct impl;
  worker_failure fail_and_restart(worker_error_code code, std::string message);
  /// Starts the worker if it is not running; says how it ended if it had died while idle.
  std::optional<worker_failure> ensure_running(std::string& died_while_idle);
  /// One request and its decoded response (evaluate, build): a malformed response restarts
  /// the worker as a protocol error.
  template <class Outcome, class Decode>
  Outcome exchange(const std::string& payload, std::chrono::milliseconds deadline, Decode decode);
  worker_config cfg_;
  std::unique_ptr<impl> impl_;
  int restarts_ = 0;
  std::atomic<bool> aborted_{false};
  std::atomic<int> pid_{0};
};

}  // namespace caf_agent::gpu_pool
