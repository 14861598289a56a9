// tests/gpu_pool/judgement_test.cpp: the judgement table, one row per outcome (label cpu).
// Each row is an outcome as its reporter states it (the worker's verdict, how the worker
// ended, the build stage, the episode) and what it must mean: status, correct, reward,
// whose fault, retry, quarantine, and words the reason must carry.
#include "gpu_pool/judgement.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace gp = caf_agent::gpu_pool;
namespace msgs = caf_agent::messages;
using msgs::eval_mode;
using msgs::eval_status;

namespace {

gp::verdict make_verdict(bool correct, std::vector<std::string> flags, double candidate = 0, double eager = 0,
                         double compile = 0) {
  gp::verdict v;
  v.correct = correct;
  v.reason = correct ? "all 5 checks passed" : "check 2: mismatch";
  v.flags = std::move(flags);
  if (candidate > 0 || eager > 0) {
    v.has_timings = true;
    v.times.candidate_ms = candidate;
    v.times.eager_ms = eager;
    v.times.compile_ms = compile;
  }
  return v;
}

struct row {
  const char* name;
  gp::job_outcome in;
  eval_status status;
  bool correct;
  int reward;
  gp::fault blame;
  bool retry;
  bool slot_failure;
  const char* reason_has;
};

gp::job_outcome out(gp::outcome what, eval_mode mode, std::string detail = "") {
  return {what, mode, {}, std::move(detail)};
}

gp::job_outcome verdict_out(eval_mode mode, gp::verdict v) {
  return {gp::outcome::verdict, mode, std::move(v), ""};
}

const double nan = std::numeric_limits<double>::quiet_NaN();

const std::vector<row>& table() {
  using gp::fault;
  using gp::outcome;
  static const std::vector<row> rows = {
      // A verdict: the reward is the robust reward of a final evaluation, 0 otherwise.
      {"final, 3: beats eager and compile", verdict_out(eval_mode::final, make_verdict(true, {}, 0.5, 1.0, 0.8)),
       eval_status::ok, true, 3, fault::none, false, false, "faster than eager and torch.compile"},
      {"final, 2: beats eager only", verdict_out(eval_mode::final, make_verdict(true, {}, 0.5, 1.0, 0.4)),
       eval_status::ok, true, 2, fault::none, false, false, "eager only"},
      {"final, 1: correct, not faster", verdict_out(eval_mode::final, make_verdict(true, {}, 1.0, 1.0, 1.0)),
       eval_status::ok, true, 1, fault::none, false, false, "not more than 5%"},
      {"final, correct but a NaN time", verdict_out(eval_mode::final, make_verdict(true, {}, nan, 1.0, 1.0)),
       eval_status::ok, true, -1, fault::policy, false, false, "invalid candidate time"},
      {"final, mismatch", verdict_out(eval_mode::final, make_verdict(false, {"mismatch"})), eval_status::ok, false, -1,
       fault::policy, false, false, "check 2"},
      {"verify, correct: no reward", verdict_out(eval_mode::verify, make_verdict(true, {})), eval_status::ok, true, 0,
       fault::none, false, false, "all 5 checks"},
      {"profile, mismatch: no reward", verdict_out(eval_mode::profile, make_verdict(false, {"mismatch"})),
       eval_status::ok, false, 0, fault::policy, false, false, "check 2"},
      // The submission crashed or hung the worker's child: the worker says so in a verdict.
      {"final, the submission segfaulted the child", verdict_out(eval_mode::final, make_verdict(false, {"crashed"})),
       eval_status::ok, false, -1, fault::policy, false, false, "check 2"},
      {"final, the child hung (the worker's own deadline)",
       verdict_out(eval_mode::final, make_verdict(false, {"timeout"})), eval_status::ok, false, -1, fault::policy,
       false, false, ""},
      {"final, a forbidden system call", verdict_out(eval_mode::final, make_verdict(false, {"forbidden_syscall"})),
       eval_status::ok, false, -1, fault::policy, false, false, ""},
      // The judge refused the task: nobody's fault, no reward, not the slot's failure.
      {"final, task error", verdict_out(eval_mode::final, make_verdict(false, {"task_error"})), eval_status::task_error,
       false, 0, fault::none, false, false, ""},
      // The worker process itself.
      {"final, the worker outlived the pool's deadline", out(outcome::worker_timeout, eval_mode::final, "no response"),
       eval_status::ok, false, -1, fault::policy, false, false, "timed out"},
      {"verify, the worker outlived the pool's deadline", out(outcome::worker_timeout, eval_mode::verify, "x"),
       eval_status::ok, false, 0, fault::policy, false, false, "timed out"},
      {"final, the worker died mid-job", out(outcome::worker_crashed, eval_mode::final, "worker killed by signal 9"),
       eval_status::infra_error, false, 0, fault::infrastructure, true, true, "signal 9"},
      {"final, the worker did not start", out(outcome::worker_unavailable, eval_mode::final, "spawn failed"),
       eval_status::infra_error, false, 0, fault::infrastructure, true, true, "spawn failed"},
      {"final, the judge failed", out(outcome::judge_error, eval_mode::final, "CUDA error"), eval_status::infra_error,
       false, 0, fault::infrastructure, true, true, "judge failure: CUDA error"},
      // The build stage.
      {"final, compile error", out(outcome::build_failed, eval_mode::final, "x.cpp:3: error: expected ';'"),
       eval_status::ok, false, -1, fault::policy, false, false, "compile error: x.cpp:3"},
      {"verify, compile error", out(outcome::build_failed, eval_mode::verify, "error"), eval_status::ok, false, 0,
       fault::policy, false, false, "compile error"},
      {"final, the builder failed: its slot builds it", out(outcome::builder_failed, eval_mode::final, "died"),
       eval_status::infra_error, false, 0, fault::infrastructure, true, false, "died"},
      // The episode and the pool.
      {"final, files could not be collected", out(outcome::submission_unreadable, eval_mode::final, "a symlink"),
       eval_status::ok, false, -1, fault::policy, false, false, "submission rejected: a symlink"},
      {"final, every slot quarantined", out(outcome::no_healthy_slot, eval_mode::final), eval_status::infra_error,
       false, 0, fault::infrastructure, false, false, "quarantined"},
      {"final, refused (a second evaluation)", out(outcome::refused, eval_mode::final, "already outstanding"),
       eval_status::rejected, false, 0, fault::infrastructure, false, false, "already outstanding"},
      {"final, a pool failed under the job: another pool takes it",
       out(outcome::pool_failed, eval_mode::final, "GPU pool failed: timeout"), eval_status::infra_error, false, 0,
       fault::infrastructure, true, false, "GPU pool failed"},
      {"final, the pool is unreachable", out(outcome::unreachable, eval_mode::final, "GPU pool unavailable"),
       eval_status::infra_error, false, 0, fault::infrastructure, false, false, "GPU pool unavailable"},
      {"final, the slot's actor died under the job: another slot takes it",
       out(outcome::slot_lost, eval_mode::final, "eval slot0 died: runtime_error"), eval_status::infra_error, false, 0,
       fault::infrastructure, true, false, "eval slot failure: eval slot0 died"},
  };
  return rows;
}

}  // namespace

TEST(judgement, every_row_of_the_table) {
  for (const auto& r : table()) {
    SCOPED_TRACE(r.name);
    auto j = gp::judge(r.in);
    EXPECT_EQ(j.status, r.status);
    EXPECT_EQ(j.correct, r.correct);
    EXPECT_EQ(j.reward, r.reward);
    EXPECT_EQ(j.blame, r.blame);
    EXPECT_EQ(j.retry, r.retry);
    EXPECT_EQ(j.slot_failure, r.slot_failure);
    EXPECT_NE(j.reason.find(r.reason_has), std::string::npos) << j.reason;
  }
}

TEST(judgement, infrastructure_never_scores_and_policy_faults_score_minus_one_when_final) {
  for (const auto& r : table()) {
    SCOPED_TRACE(r.name);
    auto j = gp::judge(r.in);
    if (j.blame == gp::fault::infrastructure) {
      EXPECT_EQ(j.reward, 0);
    }
    if (j.blame == gp::fault::policy && r.in.mode == eval_mode::final) {
      EXPECT_EQ(j.reward, -1);
    }
    if (j.status != eval_status::ok) {
      EXPECT_EQ(j.reward, 0);
    }
  }
}

TEST(judgement, a_retried_job_runs_again_once) {
  auto j = gp::judge(out(gp::outcome::worker_crashed, eval_mode::final, "died"));
  EXPECT_TRUE(gp::retry_again(j, 0));
  EXPECT_FALSE(gp::retry_again(j, gp::max_infra_retries));
  auto policy = gp::judge(out(gp::outcome::worker_timeout, eval_mode::final, "hung"));
  EXPECT_FALSE(gp::retry_again(policy, 0));
}

TEST(judgement, a_long_compiler_log_keeps_its_tail) {
  std::string log(gp::build_log_tail_chars + 500, 'x');
  log += "the error";
  auto j = gp::judge(out(gp::outcome::build_failed, eval_mode::final, log));
  EXPECT_NE(j.reason.find("...x"), std::string::npos);
  EXPECT_NE(j.reason.find("the error"), std::string::npos);
  EXPECT_LT(j.reason.size(), gp::build_log_tail_chars + 64);
}

TEST(judgement, verdict_timings_are_carried) {
  auto j = gp::judge(verdict_out(eval_mode::profile, make_verdict(true, {}, 0.5, 1.0, 0.8)));
  EXPECT_DOUBLE_EQ(j.candidate_ms, 0.5);
  EXPECT_DOUBLE_EQ(j.eager_ms, 1.0);
  EXPECT_DOUBLE_EQ(j.compile_ms, 0.8);
}

// How each worker_process failure maps to an outcome.
TEST(judgement, worker_process_outcomes) {
  using gp::worker_error_code;
  auto failed = [](worker_error_code c) {
    gp::eval_outcome e;
    e.failure = gp::worker_failure{c, "detail", true};
    return gp::outcome_of(e, eval_mode::final).what;
  };
  EXPECT_EQ(failed(worker_error_code::timeout), gp::outcome::worker_timeout);
  EXPECT_EQ(failed(worker_error_code::crashed), gp::outcome::worker_crashed);
  EXPECT_EQ(failed(worker_error_code::start_failed), gp::outcome::worker_unavailable);
  EXPECT_EQ(failed(worker_error_code::protocol_error), gp::outcome::worker_unavailable);
  gp::eval_outcome judged;
  judged.response = gp::eval_response{"1", false, "", make_verdict(true, {})};
  auto o = gp::outcome_of(judged, eval_mode::verify);
  EXPECT_EQ(o.what, gp::outcome::verdict);
  EXPECT_TRUE(o.v.correct);
  gp::eval_outcome infra;
  infra.response = gp::eval_response{"1", true, "no GPU", {}};
  o = gp::outcome_of(infra, eval_mode::verify);
  EXPECT_EQ(o.what, gp::outcome::judge_error);
  EXPECT_EQ(o.detail, "no GPU");
}
