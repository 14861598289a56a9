// The real Python eval worker driven through worker_process on a tiny CPU task (label cpu):
// a verdict for an honest and a cheating submission, a submission that hangs, and a worker
// that crashes or stops answering (killed, restarted, reported as a value).
#include "gpu_pool/worker_process.hpp"
#include "gpu_pool/judgement.hpp"
#include "tests/support/eval_worker_support.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include <signal.h>
#include <unistd.h>

namespace gp = caf_agent::gpu_pool;
namespace ts = caf_agent::test_support;
using namespace std::chrono_literals;

namespace {

std::string model_new(const std::string& body) {
  return "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
         "    def forward(self, x):\n        " +
         body + "\n";
}

std::optional<gp::worker_config> config(bool test_hooks) {
  auto python = ts::venv_python();
  if (!python) return std::nullopt;
  gp::worker_config c;
  c.python = *python;
  c.package_dir = ts::source_dir() + "/skills/eval_worker";
  c.threads = 1;
  if (test_hooks) c.env["CAF_EVAL_TEST_HOOKS"] = "1";
  return c;
}

gp::eval_request request(const std::string& forward_body) {
  gp::eval_request r;
  r.job_id = "t1";
  r.task_name = "transpose";
  r.model_py = ts::transpose_task_py();
  r.files["model_new.py"] = model_new(forward_body);
  r.seed_secret = "test-secret";
  r.device = "cpu";
  return r;
}

std::string op(const char* name) {
  auto b = nlohmann::json::to_msgpack(nlohmann::json{{"op", name}});
  return {b.begin(), b.end()};
}

}  // namespace

TEST(worker_process, config_validation_names_the_field) {
  gp::worker_config c;
  c.device = "tpu";
  auto err = c.validate();
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("device"), std::string::npos);
  c.device = "cpu";
  c.python.clear();
  EXPECT_NE(c.validate()->find("python"), std::string::npos);
}

TEST(worker_process, missing_interpreter_is_start_failed) {
  gp::worker_config c;
  c.python = "/nonexistent/python";
  c.start_timeout = 5s;
  gp::worker_process w(c);
  auto f = w.start();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->code, gp::worker_error_code::start_failed);
  // Infrastructure, retried (gpu_pool/judgement decides; this was worker_failure's own rule).
  auto j = gp::judge(gp::outcome_of({std::nullopt, *f, ""}, gp::eval_mode::final));
  EXPECT_TRUE(j.retry);
  EXPECT_EQ(j.blame, gp::fault::infrastructure);
}

TEST(worker_process, real_worker_judges_tiny_cpu_task) {
  auto c = config(false);
  if (!c) GTEST_SKIP() << "no Python venv (set CAF_AGENT_PYTHON)";
  gp::worker_process w(*c);
  ASSERT_FALSE(w.start()) << "worker failed to start";

  auto honest = w.evaluate(request("return x.t().contiguous()"), 300s);
  ASSERT_TRUE(honest.response) << honest.failure->message;
  EXPECT_FALSE(honest.response->infra_error) << honest.response->error;
  EXPECT_TRUE(honest.response->result.correct) << honest.response->result.reason;
  EXPECT_EQ(honest.response->result.checks.size(), 5u);

  auto fallback = w.evaluate(request("return (x * 1.0).t().contiguous()"), 300s);
  ASSERT_TRUE(fallback.response);
  EXPECT_FALSE(fallback.response->result.correct);
  EXPECT_NE(fallback.response->result.reason.find("aten::mul"), std::string::npos) << fallback.response->result.reason;

  auto wrong = w.evaluate(request("return x.t().contiguous().view(-1)"), 300s);  // flat
  ASSERT_TRUE(wrong.response);
  EXPECT_FALSE(wrong.response->result.correct);
  EXPECT_NE(wrong.response->result.reason.find("shape"), std::string::npos);

  auto hang = request("while True: pass");
  hang.options.call_timeout_s = 2.0;
  auto hung = w.evaluate(hang, 300s);
  ASSERT_TRUE(hung.response);
  EXPECT_FALSE(hung.response->result.correct);
  EXPECT_NE(std::find(hung.response->result.flags.begin(), hung.response->result.flags.end(), "timeout"),
            hung.response->result.flags.end());
  EXPECT_EQ(w.restarts(), 0);  // the worker itself survived: only its child was killed
}

TEST(worker_process, crashed_worker_is_detected_and_restarted) {
  auto c = config(true);
  if (!c) GTEST_SKIP() << "no Python venv (set CAF_AGENT_PYTHON)";
  gp::worker_process w(*c);
  ASSERT_FALSE(w.start());
  const int first_pid = w.pid();
  gp::worker_failure f;
  EXPECT_FALSE(w.call(op("debug_crash"), 60s, &f));
  EXPECT_EQ(f.code, gp::worker_error_code::crashed);
  EXPECT_NE(f.message.find("signal 11"), std::string::npos) << f.message;
  EXPECT_TRUE(f.restarted);
  EXPECT_NE(w.pid(), first_pid);
  // The worker itself died (submissions run in its child, whose crash is a verdict): that is
  // infrastructure, never a score. worker_failure::submission_fault() used to call it the
  // submission's fault while the slot treated it as infrastructure; gpu_pool/judgement decides.
  auto j = gp::judge(gp::outcome_of({std::nullopt, f, ""}, gp::eval_mode::final));
  EXPECT_FALSE(j.correct);
  EXPECT_EQ(j.blame, gp::fault::infrastructure);
  EXPECT_EQ(j.reward, 0);
  EXPECT_NE(j.reason.find("signal 11"), std::string::npos) << j.reason;
  EXPECT_TRUE(w.call(op("ping"), 60s, &f));  // the restarted worker answers
}

TEST(worker_process, deadline_kills_and_restarts_a_hung_worker) {
  auto c = config(true);
  if (!c) GTEST_SKIP() << "no Python venv (set CAF_AGENT_PYTHON)";
  gp::worker_process w(*c);
  ASSERT_FALSE(w.start());
  gp::worker_failure f;
  EXPECT_FALSE(w.call(op("debug_hang"), 1500ms, &f));
  EXPECT_EQ(f.code, gp::worker_error_code::timeout);
  EXPECT_TRUE(f.restarted);
  EXPECT_EQ(w.restarts(), 1);
  EXPECT_TRUE(w.running());
}

TEST(worker_process, worker_killed_while_idle_is_reported_and_replaced) {
  auto c = config(false);
  if (!c) GTEST_SKIP() << "no Python venv (set CAF_AGENT_PYTHON)";
  gp::worker_process w(*c);
  ASSERT_FALSE(w.start());
  const int first_pid = w.pid();
  ASSERT_EQ(::kill(first_pid, SIGKILL), 0);
  for (int i = 0; i < 100 && w.running(); ++i) std::this_thread::sleep_for(20ms);
  auto out = w.evaluate(request("return x.t().contiguous()"), 300s);
  EXPECT_NE(out.died_while_idle.find("killed by signal 9"), std::string::npos) << out.died_while_idle;
  ASSERT_TRUE(out.response) << (out.failure ? out.failure->message : "");
  EXPECT_TRUE(out.response->result.correct) << out.response->result.reason;
  EXPECT_NE(w.pid(), first_pid);
  EXPECT_EQ(w.restarts(), 1);
  auto again = w.evaluate(request("return x.t().contiguous()"), 300s);
  EXPECT_TRUE(again.died_while_idle.empty());
}

// The pool's build stage on real processes: a --build-only worker compiles into a build root,
// and a judging worker sharing that root finds the library built (no compile on its time).
TEST(worker_process, builder_compiles_for_a_judging_worker) {
  auto c = config(false);
  if (!c) GTEST_SKIP() << "no Python venv (set CAF_AGENT_PYTHON)";
  auto root = std::filesystem::temp_directory_path() / ("caf_build_stage_" + std::to_string(::getpid()));
  c->env["CAF_EVAL_BUILD_ROOT"] = root.string();
  c->env["CAF_EVAL_PCH"] = "0";  // one small unit: the precompiled header would cost more
  auto b = *c;
  b.build_only = true;
  gp::worker_process builder(b);
  gp::worker_process judge(*c);
  const std::string nonce = "n" + std::to_string(::getpid());

  gp::build_request br;
  br.job_id = "b1";
  br.files = ts::transpose_kernel_submission(nonce);
  auto built = builder.build(br, 600s);
  ASSERT_TRUE(built.response) << built.failure->message;
  ASSERT_FALSE(built.response->infra_error) << built.response->error;
  EXPECT_TRUE(built.response->ok) << built.response->log;
  EXPECT_FALSE(built.response->cached);
  EXPECT_GT(built.response->seconds.at("total"), 0.0);

  auto req = request("");
  req.files = ts::transpose_kernel_submission(nonce);
  auto v = judge.evaluate(req, 300s);
  ASSERT_TRUE(v.response) << v.failure->message;
  EXPECT_TRUE(v.response->result.correct) << v.response->result.reason;
  EXPECT_TRUE(v.response->result.cached_build);

  // A compile error comes back as a failed build with the compiler's words, not a failure.
  br.files["kernels/t.cpp"] += "\nint broken( {\n";
  auto bad = builder.build(br, 600s);
  ASSERT_TRUE(bad.response);
  EXPECT_FALSE(bad.response->ok);
  EXPECT_NE(bad.response->log.find("kernels/t.cpp"), std::string::npos) << bad.response->log;

  // A builder judges nothing.
  auto refused = builder.evaluate(req, 60s);
  ASSERT_TRUE(refused.response);
  EXPECT_TRUE(refused.response->infra_error);
  EXPECT_NE(refused.response->error.find("--build-only"), std::string::npos);
  std::filesystem::remove_all(root);
}
