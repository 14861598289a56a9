/// gpu_pool/judgement.cpp: see judgement.hpp.
#include "gpu_pool/judgement.hpp"

#include <algorithm>

#include "gpu_pool/reward.hpp"

namespace caf_agent::gpu_pool {
namespace {

using messages::eval_mode;
using messages::eval_status;

bool has_flag(const verdict& v, const char* flag) {
  return std::find(v.flags.begin(), v.flags.end(), flag) != v.flags.end();
}

/// A failure the submission is charged with: no verdict of its own, reward -1 when final.
judgement policy_failure(const job_outcome& o, std::string reason) {
  judgement j;
  j.reason = std::move(reason);
  j.reward = o.mode == eval_mode::final ? -1 : 0;
  j.blame = fault::policy;
  return j;
}

/// A failure of the infrastructure: no verdict, never a score.
judgement infra_failure(eval_status status, std::string reason, bool retry, bool slot_failure) {
  judgement j;
  j.status = status;
  j.reason = std::move(reason);
  j.blame = fault::infrastructure;
  j.retry = retry;
  j.slot_failure = slot_failure;
  return j;
}

judgement from_verdict(const job_outcome& o) {
  const verdict& v = o.v;
  judgement j;
  j.correct = v.correct;
  j.reason = v.reason;
  if (v.has_timings) {
    j.candidate_ms = v.times.candidate_ms;
    j.eager_ms = v.times.eager_ms;
    j.compile_ms = v.times.compile_ms;
  }
  if (has_flag(v, "task_error")) {
    // The judge refused the task itself (degenerate, too large, a reference that raises):
    // neither the policy's fault (no reward) nor the slot's (never counts towards quarantine).
    j.status = eval_status::task_error;
    return j;
  }
  if (o.mode == eval_mode::final) {
    auto r = robust_reward({v.correct, j.candidate_ms, j.eager_ms, j.compile_ms});
    j.reward = r.reward;
    if (v.correct && !r.reason.empty()) j.reason += (j.reason.empty() ? "" : "; ") + r.reason;
  }
  j.blame = !v.correct || j.reward < 0 ? fault::policy : fault::none;
  return j;
}

std::string log_tail(const std::string& log) {
  return log.size() > build_log_tail_chars ? "..." + log.substr(log.size() - build_log_tail_chars) : log;
}

}  // namespace

judgement judge(const job_outcome& o) {
  switch (o.what) {
    case outcome::verdict:
      return from_verdict(o);
    case outcome::judge_error:
      return infra_failure(eval_status::infra_error, "judge failure: " + o.detail, true, true);
    case outcome::worker_timeout:
      // Rationale: the worker bounds every phase of a job with its own deadlines and reports
      // a hung child as a verdict; a job that outlives the pool's deadline as well is still
      // the submission running, so it is charged to the policy (not retried: it would hang
      // again) and never counts against the slot.
      return policy_failure(o, "evaluation timed out: " + o.detail);
    case outcome::worker_crashed:
      // Rationale: the worker runs each submission in its own child and reports a child's
      // crash (a segfaulting kernel, a forbidden system call) as a verdict, so the worker
      // itself dying is never the submission's doing: OOM killer, operator, node trouble.
      // Charging the policy here would also let a flaky host teach it -1 for correct code.
      return infra_failure(eval_status::infra_error, "eval worker failure: " + o.detail, true, true);
    case outcome::worker_unavailable:
      return infra_failure(eval_status::infra_error, "eval worker failure: " + o.detail, true, true);
    case outcome::build_failed:
      return policy_failure(o, "compile error: " + log_tail(o.detail));
    case outcome::builder_failed:
      // The job goes on to its slot, which builds it: not the slot's failure.
      return infra_failure(eval_status::infra_error, "builder failure: " + o.detail, true, false);
    case outcome::submission_unreadable:
      return policy_failure(o, "submission rejected: " + o.detail);
    case outcome::no_healthy_slot:
      return infra_failure(eval_status::infra_error, "every eval slot is quarantined", false, false);
    case outcome::refused:
      return infra_failure(eval_status::rejected, o.detail, false, false);
    case outcome::pool_failed:
      return infra_failure(eval_status::infra_error, o.detail, true, false);
    case outcome::unreachable:
      return infra_failure(eval_status::infra_error, o.detail, false, false);
    case outcome::slot_lost:
      // Like a worker that died mid-job: not the submission's doing (the slot runs it in a
      // worker process), retried once on another slot. The slot itself leaves the pool for
      // good (the pool's decision, not a count towards quarantine).
      return infra_failure(eval_status::infra_error, "eval slot failure: " + o.detail, true, false);
  }
  return infra_failure(eval_status::infra_error, "unknown outcome", false, false);
}

bool retry_again(const judgement& j, int retries) {
  return j.retry && retries < max_infra_retries;
}

job_outcome outcome_of(const eval_outcome& e, eval_mode mode) {
  job_outcome o;
  o.mode = mode;
  if (e.response && !e.response->infra_error) {
    o.what = outcome::verdict;
    o.v = e.response->result;
  } else if (e.response) {
    o.what = outcome::judge_error;
    o.detail = e.response->error;
  } else if (e.failure) {
    o.detail = e.failure->message;
    switch (e.failure->code) {
      case worker_error_code::timeout:
        o.what = outcome::worker_timeout;
        break;
      case worker_error_code::crashed:
        o.what = outcome::worker_crashed;
        break;
      case worker_error_code::start_failed:
      case worker_error_code::protocol_error:
        o.what = outcome::worker_unavailable;
        break;
    }
  } else {
    o.what = outcome::worker_unavailable;
    o.detail = "unknown";
  }
  return o;
}

}  // namespace caf_agent::gpu_pool
