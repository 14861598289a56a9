#pragma once
/// gpu_pool/judgement.hpp: the one place that decides what an evaluation's outcome means:
/// its status and verdict, its reward, whose fault a failure is and whether the pool runs
/// the job again (a pure function; tests/gpu_pool/judgement_test.cpp holds the table).
///
/// Everyone else reports facts: the eval worker (skills/eval_worker) its verdict, the worker
/// process how the worker ended, the build stage what the compiler said, the episode that it
/// could not collect the files or reach the pool. docs/ARCHITECTURE.md ("Judgement") shows
/// the table.

#include <cstdint>
#include <string>

#include "gpu_pool/worker_process.hpp"
#include "gpu_pool/worker_protocol.hpp"
#include "messages/enums.hpp"

namespace caf_agent::gpu_pool {

/// Whose fault a failed evaluation is.
enum class fault {
  none,            ///< nothing failed, or nobody's (a task the judge refuses)
  policy,          ///< the submission: reward -1 on a final evaluation
  infrastructure,  ///< the judge, the worker, the pool or the network: never a score
};

/// What happened to one evaluation job.
enum class outcome {
  verdict,                ///< the judge answered with a verdict (correct or not, its flags)
  judge_error,            ///< the worker answered infra_error: the judge itself failed
  worker_timeout,         ///< no answer within the job's deadline; the worker was killed
  worker_crashed,         ///< the worker process died or stopped answering mid-job
  worker_unavailable,     ///< the worker did not start, or sent a malformed frame
  build_failed,           ///< the build stage refused the sources (compile error, static check)
  builder_failed,         ///< the builder itself failed (not the sources)
  submission_unreadable,  ///< the episode could not collect the workspace's files
  no_healthy_slot,        ///< every slot of the pool is quarantined
  refused,                ///< the pool refused the request (duplicate job, a second one per episode)
  pool_failed,            ///< a pool failed under the job (no answer in time, a broken connection)
  unreachable,            ///< the pool, its node or the tool router did not answer
  slot_lost,              ///< the slot's actor died under the job (its backend threw, or it was killed)
};

/// The facts of one job's outcome.
struct job_outcome {
  outcome what = outcome::verdict;
  messages::eval_mode mode = messages::eval_mode::verify;
  verdict v;           ///< the judge's verdict (outcome::verdict)
  std::string detail;  ///< the failure's text: worker message, compiler log, error
};

/// What the outcome means.
struct judgement {
  messages::eval_status status = messages::eval_status::ok;
  bool correct = false;
  int32_t reward = 0;  ///< final evaluations only (-1, 1, 2, 3); 0 otherwise and without a verdict
  fault blame = fault::none;
  bool retry = false;         ///< the pool runs the job again (at most max_infra_retries times)
  bool slot_failure = false;  ///< counts towards the slot's quarantine
  std::string reason;         ///< agent-readable
  double candidate_ms = 0, eager_ms = 0, compile_ms = 0;  ///< from the verdict's timings
};

/// Rationale: one retry absorbs a worker that died or restarted under a job (the slot
/// restarts it), or a pool lost under it (another pool takes it); a second failure of the
/// same job is reported as infrastructure.
inline constexpr int max_infra_retries = 1;

/// Rationale: the compiler's last words name the error; the agent's own ./compile shows
/// the whole log.
inline constexpr std::size_t build_log_tail_chars = 3000;

/// The judgement of one outcome (the table in docs/ARCHITECTURE.md).
judgement judge(const job_outcome& o);

/// True when a job judged `j` that has been retried `retries` times runs again.
bool retry_again(const judgement& j, int retries);

/// The outcome of a worker_process::evaluate call: a verdict, the judge's own error, or how
/// the worker failed.
job_outcome outcome_of(const eval_outcome& e, messages::eval_mode mode);

}  // namespace caf_agent::gpu_pool
