#pragma once
/// gpu_pool/slot_backend.hpp: what a GPU-pool slot runs a job on (no actor code).
///
/// `worker` wraps the persistent Python eval worker (blocking); `sim` returns a
/// verdict after a simulated latency (for load tests at 128-GPU scale).

#include <chrono>
#include <memory>
#include <random>
#include <string>

#include "gpu_pool/judgement.hpp"
#include "gpu_pool/pool_config.hpp"
#include "messages/eval.hpp"

namespace caf_agent::gpu_pool {

/// A job's result plus the delay a non-blocking backend asks the slot to wait.
struct slot_reply {
  messages::eval_result result;
  std::chrono::microseconds delay{0};
  bool infra_failure = false;  ///< counts towards the slot's quarantine
  bool retry = false;          ///< the pool runs the job again (retry_again)
  std::string notice;          ///< something the pool should log (a worker restarted while idle)
};

/// The eval_result of job `job_id` as judged (status, verdict, reward, timings).
messages::eval_result result_of(const judgement& j, uint64_t job_id);

/// The slot's reply carrying judgement j of req's job.
slot_reply reply_of(const judgement& j, const messages::eval_request& req);

/// One slot's executor.
class slot_backend {
 public:
  virtual ~slot_backend() = default;
  /// Runs one job (blocking for real backends). Never throws.
  virtual slot_reply run(const messages::eval_request& req) = 0;
  /// True when run() blocks (the slot actor is then detached).
  virtual bool blocking() const = 0;
  /// Releases the worker process, if any.
  virtual void stop() {}
  /// The worker's pid (0 when none), for tests that kill it.
  virtual int worker_pid() const { return 0; }
  /// Safe from any thread: makes a blocked run() return at once (shutdown).
  virtual void abort() {}
};

/// The outcome of a build ahead of a job (the pool's build stage).
struct build_reply {
  bool ok = false;             ///< built, or found built
  bool infra_failure = false;  ///< the builder failed, not the sources: the slot builds instead
  bool cached = false;         ///< found built: nothing compiled
  std::string log;             ///< the compiler's output or the static checks' findings
  std::string notice;          ///< something the pool should log (a builder restarted)
};

/// What a build-stage actor runs: compiles a job's kernels where its slot's job will find
/// them (no actor code). Blocking.
class build_backend {
 public:
  virtual ~build_backend() = default;
  /// Builds req's kernel sources. Never throws.
  virtual build_reply build(const messages::eval_request& req) = 0;
  /// Releases the builder process, if any.
  virtual void stop() {}
  /// Safe from any thread: makes a blocked build() return at once (shutdown).
  virtual void abort() {}
};

/// Settings of a real worker slot.
struct worker_slot_options {
  std::string python;
  std::string package_dir;  ///< skills/eval_worker
  std::string device;       ///< cpu or cuda:N
  int threads = 1;
  std::string stderr_path;
  int64_t deadline_ms = gpu_pool::pool_config{}.job_deadline_s * 1000;  ///< [gpu_pool] job_deadline_s
  /// Build cache of submissions (CAF_EVAL_BUILD_ROOT); empty: the worker's own temporary one.
  /// Slots of a node share one: entries are keyed by content and locked, and the precompiled
  /// header (~360 MB, ~15 s on an H200 host) is then built once per node, not per worker start.
  std::string build_root;
};

/// The real backend: a persistent eval worker process.
std::unique_ptr<slot_backend> make_worker_slot(const worker_slot_options& opts);

/// The real builder: a persistent --build-only eval worker (compilers only, on CPU cores)
/// building for `opts.device`'s flavour into `opts.build_root`, which must be the build root
/// of the slots it serves.
std::unique_ptr<build_backend> make_worker_builder(const worker_slot_options& opts);

/// The sim backend: lognormal latency around `mean_ms`; correct with probability
/// `correct_rate`.
std::unique_ptr<slot_backend> make_sim_slot(double mean_ms, double correct_rate, uint64_t seed);

}  // namespace caf_agent::gpu_pool
