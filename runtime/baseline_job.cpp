// runtime/baseline_job.cpp: see baseline_job.hpp.
#include "runtime/baseline_job.hpp"

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include <caf/all.hpp>

#include "actors/gpu_pool.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "rollout/baseline_report.hpp"
#include "rollout/tasks.hpp"

namespace caf_agent::runtime {

namespace {

namespace fs = std::filesystem;

// Rationale: job ids of baseline jobs start here, far from the episodes' (1, 2, ...), so a
// pool shared with a run never sees one id twice; each job is its own "episode" for the
// scheduler's one-job-per-episode rule.
constexpr uint64_t first_job_id = uint64_t{1} << 62;

/// What the sender actor fills in and the waiting thread reads once the latch fired.
struct baseline_state {
  std::vector<rollout::baseline_row> rows;
  size_t next = 0;
  size_t answered = 0;
};

/// Keeps `window` jobs in flight until every task has been sent; each answer fills its row.
caf::behavior baseline_sender(caf::event_based_actor* self, evaluator_actor pool, std::shared_ptr<baseline_state> st,
                              size_t window, uint64_t seed, exit_latch* latch) {
  auto send_next = std::make_shared<std::function<void()>>();
  *send_next = [=] {
    if (st->next >= st->rows.size()) return;
    auto i = st->next++;
    messages::eval_request req;
    req.job_id = req.episode_id = first_job_id + i;
    req.mode = messages::eval_mode::baseline;
    req.task = st->rows[i].task;
    req.seed = seed + i;
    auto done = [=](messages::eval_result r) {
      st->rows[i].result = std::move(r);
      st->rows[i].answered = true;
      if (++st->answered == st->rows.size())
        latch->finish(0, "baselines done");
      else
        (*send_next)();
    };
    self->request(pool, caf::infinite, std::move(req))
        .then([=](messages::eval_result& r) { done(std::move(r)); },
              [=](caf::error& e) {
                messages::eval_result r;
                r.status = messages::eval_status::infra_error;
                r.reason = "the GPU pool did not answer: " + to_string(e);
                done(std::move(r));
              });
  };
  for (size_t k = 0; k < window; ++k) (*send_next)();
  return {[](atoms::stop) {}};
}

}  // namespace

int run_baselines(caf::actor_system& sys, const cli_options& opts, const app_config& cfg,
                  const std::map<std::string, caf::actor>& peers, exit_latch& latch) {
  auto it = peers.find("gpu_pool");
  if (it == peers.end()) {
    log_error("caf-agent", "--baselines: this process runs no GPU pool");
    return 2;
  }
  std::string error;
  auto set = rollout::load_task_set(cfg.rollout.tasks_dir, opts.level_list, error);
  if (!error.empty()) {
    log_error("caf-agent", error);
    return 2;
  }
  for (auto& [file, why] : set.skipped) log_error("baselines", "skipped " + file + ": " + why);
  auto st = std::make_shared<baseline_state>();
  for (auto& t : set.tasks) st->rows.push_back({t, {}, false});
  log_info("baselines", "timing the references of " + std::to_string(st->rows.size()) + " tasks from " +
                            cfg.rollout.tasks_dir + " on the GPU pool (" + std::to_string(cfg.gpu_pool.slots) +
                            " slots, device " + to_string(cfg.gpu_pool.device) + ")");
  auto window = static_cast<size_t>(std::max(1, 2 * cfg.gpu_pool.slots));
  auto sender = sys.spawn(baseline_sender, pool_of(it->second), st, window, cfg.policy.seed, &latch);
  latch.wait();
  // The sender's state is read only after it is gone (it ran on the scheduler's threads).
  caf::scoped_actor self{sys};
  self->send_exit(sender, caf::exit_reason::user_shutdown);
  self->wait_for(sender);
  for (auto& r : st->rows) r.task.model_py.clear();
  for (auto& [file, why] : set.skipped) {
    rollout::baseline_row r;
    r.task.task_id = r.task.name = fs::path(file).filename().string();
    r.task.level = 0;
    r.answered = true;
    r.result.status = messages::eval_status::rejected;
    r.result.reason = "not read: " + why;
    st->rows.push_back(std::move(r));
  }
  auto report = rollout::make_baseline_report(st->rows);
  auto path = fs::path{cfg.runtime.run_dir} / ("baselines-" + std::to_string(unix_ms()) + ".json");
  std::error_code ec;
  fs::create_directories(cfg.runtime.run_dir, ec);
  std::ofstream(path) << rollout::baseline_report_json(report, st->rows) << "\n";
  std::printf("\n%s(every row in %s)\n", rollout::format_baseline_report(report, st->rows).c_str(), path.c_str());
  std::fflush(stdout);
  if (!latch.finished()) {
    log_error("baselines", "interrupted (" + latch.reason() + ") before the pool answered every job");
    return 1;
  }
  return 0;
}

}  // namespace caf_agent::runtime
