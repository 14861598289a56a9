// tests/actors/gpu_pool_test.cpp: the GPU pool's build stage. With fake backends: jobs with
// kernel sources reach their slot built, jobs without skip the builders, a compile error
// ends the job without a slot, a failed builder hands the job on, and every job gets one
// result. With the real eval workers (CPU): a builder compiles, the slot's job finds the
// library built.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <unistd.h>

#include <caf/all.hpp>

#include "actors/gpu_pool.hpp"
#include "messages/type_ids.hpp"
#include "tests/support/eval_worker_support.hpp"

using namespace caf_agent;
using namespace caf_agent::messages;
using namespace std::chrono_literals;

namespace {

/// What the fakes saw, shared between them and the test.
struct ledger {
  std::mutex mu;
  std::set<uint64_t> built;  // job ids a builder built
  std::atomic<int> slot_runs{0};
  std::atomic<int> builds{0};
};

/// A slot that says "correct" only when its job was built before it arrived.
class fake_slot final : public gpu_pool::slot_backend {
 public:
  explicit fake_slot(std::shared_ptr<ledger> l) : l_(std::move(l)) {}
  gpu_pool::slot_reply run(const eval_request& req) override {
    ++l_->slot_runs;
    gpu_pool::slot_reply out;
    out.result.job_id = req.job_id;
    out.result.status = eval_status::ok;
    std::lock_guard lk{l_->mu};
    out.result.correct = l_->built.contains(req.job_id);
    out.result.reason = out.result.correct ? "built ahead" : "built on the slot";
    return out;
  }
  bool blocking() const override { return true; }

 private:
  std::shared_ptr<ledger> l_;
};

/// A builder: kernels/bad.cpp fails to compile, kernels/infra.cpp breaks the builder.
class fake_builder final : public gpu_pool::build_backend {
 public:
  explicit fake_builder(std::shared_ptr<ledger> l) : l_(std::move(l)) {}
  gpu_pool::build_reply build(const eval_request& req) override {
    ++l_->builds;
    std::this_thread::sleep_for(20ms);  // a compile takes time
    gpu_pool::build_reply r;
    if (req.files.contains("kernels/infra.cpp")) {
      r.infra_failure = true;
      r.log = "builder crashed";
    } else if (req.files.contains("kernels/bad.cpp")) {
      r.log = "kernels/bad.cpp:3:1: error: expected ';' before '}' token";
    } else {
      r.ok = true;
      std::lock_guard lk{l_->mu};
      l_->built.insert(req.job_id);
    }
    return r;
  }

 private:
  std::shared_ptr<ledger> l_;
};

struct pool_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<ledger> l = std::make_shared<ledger>();
  pool_actor pool;

  pool_fixture(int slots, int builders) {
    cfg.add_message_types<caf::id_block::caf_agent>();
    cfg.set("logger.console-verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    std::vector<std::unique_ptr<gpu_pool::slot_backend>> s;
    for (int i = 0; i < slots; ++i) s.push_back(std::make_unique<fake_slot>(l));
    std::vector<std::unique_ptr<gpu_pool::build_backend>> b;
    for (int i = 0; i < builders; ++i) b.push_back(std::make_unique<fake_builder>(l));
    pool = spawn_gpu_pool(*sys, {.queue_capacity = 64, .quarantine_after_failures = 3}, std::move(s), std::move(b));
  }
  ~pool_fixture() {
    caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
    pool = nullptr;
    sys.reset();
  }

  eval_result eval(uint64_t id, std::map<std::string, std::string> files, std::string mode = "verify") {
    caf::scoped_actor self{*sys};
    eval_request req;
    req.job_id = id;
    req.episode_id = id;
    req.mode = parse_name<eval_mode>(mode).value();
    req.files = std::move(files);
    eval_result out;
    self->request(pool, 30s, req)
        .receive([&](eval_result& r) { out = std::move(r); },
                 [&](caf::error& e) { out.status = eval_status::infra_error, out.reason = "error: " + to_string(e); });
    return out;
  }

  std::map<std::string, double> stats() {
    caf::scoped_actor self{*sys};
    std::map<std::string, double> out;
    self->request(pool, 10s, atoms::stats::value)
        .receive([&](std::map<std::string, double>& m) { out = std::move(m); }, [](caf::error&) {});
    return out;
  }
};

const std::map<std::string, std::string> k_kernel = {{"kernels/a.cpp", "int f();"}, {"model_new.py", ""}};

}  // namespace

TEST(gpu_pool_build_stage, a_job_with_kernel_sources_reaches_its_slot_built) {
  pool_fixture f{1, 1};
  auto r = f.eval(1, k_kernel);
  EXPECT_EQ(r.status, eval_status::ok);
  EXPECT_TRUE(r.correct) << r.reason;
  EXPECT_GE(r.build_us, 20000);
  EXPECT_EQ(f.l->builds.load(), 1);
  EXPECT_EQ(f.l->slot_runs.load(), 1);
  EXPECT_EQ(f.stats().at("builds"), 1.0);
}

TEST(gpu_pool_build_stage, a_job_without_kernel_sources_skips_the_builders) {
  pool_fixture f{1, 1};
  auto r = f.eval(1, {{"model_new.py", ""}, {"kernels/notes.h", ""}});
  EXPECT_EQ(r.status, eval_status::ok);
  EXPECT_EQ(r.reason, "built on the slot");
  EXPECT_EQ(r.build_us, 0);
  EXPECT_EQ(f.l->builds.load(), 0);
}

TEST(gpu_pool_build_stage, a_compile_error_ends_the_job_without_a_slot) {
  pool_fixture f{1, 1};
  auto r = f.eval(1, {{"kernels/bad.cpp", "}"}}, "final");
  EXPECT_EQ(r.status, eval_status::ok);
  EXPECT_FALSE(r.correct);
  EXPECT_EQ(r.reward, -1);
  EXPECT_NE(r.reason.find("compile error"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("kernels/bad.cpp:3:1: error: expected ';'"), std::string::npos) << r.reason;
  EXPECT_EQ(f.l->slot_runs.load(), 0);
  EXPECT_EQ(f.stats().at("build_failures"), 1.0);
  auto verify = f.eval(2, {{"kernels/bad.cpp", "}"}}, "verify");
  EXPECT_EQ(verify.reward, 0);  // rewards are judged on final evaluations only
}

TEST(gpu_pool_build_stage, a_failed_builder_hands_the_job_to_its_slot) {
  pool_fixture f{1, 1};
  auto r = f.eval(1, {{"kernels/infra.cpp", ""}});
  EXPECT_EQ(r.status, eval_status::ok);
  EXPECT_EQ(r.reason, "built on the slot");
  EXPECT_EQ(f.l->slot_runs.load(), 1);
  EXPECT_EQ(f.stats().at("build_infra"), 1.0);
}

TEST(gpu_pool_build_stage, many_jobs_through_two_builders_and_one_slot_each_get_one_result) {
  pool_fixture f{1, 2};
  caf::scoped_actor self{*f.sys};
  constexpr int n = 24;
  for (int i = 1; i <= n; ++i) {
    eval_request req;
    req.job_id = static_cast<uint64_t>(i);
    req.episode_id = static_cast<uint64_t>(i);
    req.mode = eval_mode::verify;
    req.files = i % 3 == 0 ? std::map<std::string, std::string>{{"kernels/bad.cpp", "}"}} : k_kernel;
    self->send(f.pool, req);
  }
  std::set<uint64_t> seen;
  int correct = 0, failed_builds = 0;
  for (int i = 0; i < n; ++i)
    self->receive(
        [&](eval_result& r) {
          EXPECT_TRUE(seen.insert(r.job_id).second) << "two results for job " << r.job_id;
          correct += r.correct;
          failed_builds += r.reason.rfind("compile error", 0) == 0;
        },
        caf::after(30s) >> [&] { ADD_FAILURE() << "a job got no result"; });
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  EXPECT_EQ(correct, n - n / 3);
  EXPECT_EQ(failed_builds, n / 3);
  EXPECT_EQ(f.l->slot_runs.load(), n - n / 3);
  auto s = f.stats();
  EXPECT_EQ(s.at("building"), 0.0);
  EXPECT_EQ(s.at("builds"), double(n));
}

// The real path on CPU: a --build-only eval worker and a judging worker sharing a build root.
TEST(gpu_pool_build_stage, real_builder_compiles_so_the_real_slot_does_not) {
  auto python = test_support::venv_python();
  if (!python) GTEST_SKIP() << "no Python venv (set CAF_AGENT_PYTHON)";
  ::setenv("CAF_EVAL_PCH", "0", 1);  // one small unit: the precompiled header would cost more
  auto build_root = std::filesystem::temp_directory_path() / ("caf_pool_build_" + std::to_string(::getpid()));
  gpu_pool::worker_slot_options w;
  w.python = *python;
  w.package_dir = test_support::source_dir() + "/skills/eval_worker";
  w.device = "cpu";
  w.threads = 1;
  w.build_root = build_root.string();
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::caf_agent>();
  caf::actor_system sys{cfg};
  std::vector<std::unique_ptr<gpu_pool::slot_backend>> slots;
  slots.push_back(gpu_pool::make_worker_slot(w));
  std::vector<std::unique_ptr<gpu_pool::build_backend>> builders;
  builders.push_back(gpu_pool::make_worker_builder(w));
  auto pool =
      spawn_gpu_pool(sys, {.queue_capacity = 8, .quarantine_after_failures = 3}, std::move(slots), std::move(builders));

  const std::string nonce = "p" + std::to_string(::getpid());
  eval_request req;
  req.job_id = 1;
  req.episode_id = 1;
  req.mode = eval_mode::verify;
  req.task.task_id = "transpose";
  req.task.model_py = test_support::transpose_task_py();
  req.files = test_support::transpose_kernel_submission(nonce);
  caf::scoped_actor self{sys};
  auto ask = [&](const eval_request& r) {
    eval_result out;
    self->request(pool, 600s, r)
        .receive([&](eval_result& x) { out = std::move(x); },
                 [&](caf::error& e) { out.status = eval_status::infra_error, out.reason = "error: " + to_string(e); });
    return out;
  };
  auto r = ask(req);
  EXPECT_EQ(r.status, eval_status::ok) << r.reason;
  EXPECT_TRUE(r.correct) << r.reason;
  EXPECT_TRUE(r.cached_build);  // the slot's child compiled nothing
  EXPECT_GT(r.build_us, 0);

  req.job_id = 2;
  req.files["kernels/t.cpp"] += "\nint broken( {\n";
  auto bad = ask(req);
  EXPECT_FALSE(bad.correct);
  EXPECT_EQ(bad.slot, "builder0");
  EXPECT_NE(bad.reason.find("kernels/t.cpp"), std::string::npos) << bad.reason;

  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(build_root);
}

// A task the judge refuses (here: its reference raises) answers
// "task_error" and never counts towards quarantine: more such jobs than quarantine_after on
// the only slot, then an honest job, which the slot still takes.
TEST(gpu_pool_task_errors, refused_tasks_do_not_quarantine_the_slot) {
  auto python = test_support::venv_python();
  if (!python) GTEST_SKIP() << "no Python venv (set CAF_AGENT_PYTHON)";
  ::setenv("CAF_EVAL_PCH", "0", 1);
  auto build_root = std::filesystem::temp_directory_path() / ("caf_pool_task_" + std::to_string(::getpid()));
  gpu_pool::worker_slot_options w;
  w.python = *python;
  w.package_dir = test_support::source_dir() + "/skills/eval_worker";
  w.device = "cpu";
  w.threads = 1;
  w.build_root = build_root.string();
  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::caf_agent>();
  caf::actor_system sys{cfg};
  std::vector<std::unique_ptr<gpu_pool::slot_backend>> slots;
  slots.push_back(gpu_pool::make_worker_slot(w));
  const int quarantine_after = 2;
  auto pool =
      spawn_gpu_pool(sys, {.queue_capacity = 8, .quarantine_after_failures = quarantine_after}, std::move(slots));
  caf::scoped_actor self{sys};
  auto ask = [&](const eval_request& r) {
    eval_result out;
    self->request(pool, 600s, r)
        .receive([&](eval_result& x) { out = std::move(x); },
                 [&](caf::error& e) { out.status = eval_status::infra_error, out.reason = "error: " + to_string(e); });
    return out;
  };
  const std::string nonce = "q" + std::to_string(::getpid());
  eval_request req;
  req.episode_id = 1;
  req.mode = eval_mode::final;
  req.task.task_id = "raises";
  req.task.model_py =
      "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
      "    def forward(self, x):\n        return x @ torch.ones(3, 3)\n\n"
      "def get_inputs():\n    return [torch.randn(8, 33)]\n\ndef get_init_inputs():\n    return []\n";
  req.files = test_support::transpose_kernel_submission(nonce);
  for (int i = 0; i < quarantine_after + 1; ++i) {
    req.job_id = 10 + i;
    auto r = ask(req);
    EXPECT_EQ(r.status, eval_status::task_error) << r.reason;
    EXPECT_NE(r.reason.find("the task's reference raised"), std::string::npos) << r.reason;
    EXPECT_EQ(r.reward, 0);
  }
  req.job_id = 20;
  req.mode = eval_mode::verify;
  req.task.task_id = "transpose";
  req.task.model_py = test_support::transpose_task_py();
  auto ok = ask(req);
  EXPECT_EQ(ok.status, eval_status::ok) << ok.reason;
  EXPECT_TRUE(ok.correct) << ok.reason;
  caf::anon_send_exit(pool, caf::exit_reason::user_shutdown);
  std::filesystem::remove_all(build_root);
}
