// runtime/main_job.cpp: the run itself: episodes over the tasks, then the report.
#include <filesystem>

#include <caf/all.hpp>

#include "actors/run_driver.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "observe/report.hpp"
#include "rollout/eval_report.hpp"
#include "rollout/run_plan.hpp"
#include "rollout/tasks.hpp"
#include "rollout/trajectory_store.hpp"
#include "runtime/baseline_job.hpp"
#include "runtime/local_job.hpp"
#include "runtime/observe_service.hpp"
#include "runtime/process.hpp"
#include "runtime/train_job.hpp"

namespace caf_agent::runtime {

namespace {

namespace fs = std::filesystem;

std::string store_dir_for(const app_config& cfg) {
  auto stamp = std::to_string(unix_ms());
  return cfg.runtime.run_dir + "/trajectories-" + stamp;
}

/// A new run: its episodes from the config, written down as the run's plan first.
std::string plan_new_run(const cli_options& opts, const app_config& cfg, run_driver_options& d) {
  std::string error;
  auto set = rollout::load_task_set(cfg.rollout.tasks_dir, opts.level_list, error);
  if (!error.empty()) return error;
  for (auto& [file, why] : set.skipped) log_error("driver", "skipped " + file + ": " + why);
  d.tasks = std::move(set.tasks);
  d.episodes =
      cfg.rollout.episodes > 0 ? cfg.rollout.episodes : static_cast<int>(d.tasks.size()) * cfg.rollout.attempts;
  d.mode = opts.eval ? messages::episode_mode::eval : cfg.rollout.mode;
  d.max_turns = d.mode == messages::episode_mode::eval ? cfg.rollout.max_turns_eval : cfg.rollout.max_turns_train;
  d.wall_limit_ms = cfg.rollout.wall_limit_s * 1000;
  d.store_dir = store_dir_for(cfg);
  d.planned = plan_episodes(d);
  rollout::run_plan plan;
  plan.mode = d.mode;
  plan.max_turns = d.max_turns;
  plan.wall_limit_ms = d.wall_limit_ms;
  plan.tasks_dir = fs::absolute(cfg.rollout.tasks_dir).string();
  for (auto& s : d.planned) plan.episodes.push_back({s.episode_id, s.task.task_id, s.seed});
  if (auto err = rollout::write_run_plan(d.store_dir, plan)) return *err;
  log_info("driver", "running " + std::to_string(d.episodes) + " " + to_string(d.mode) + " episodes over " +
                         std::to_string(d.tasks.size()) + " tasks from " + cfg.rollout.tasks_dir + " (plan in " +
                         d.store_dir + "/" + rollout::run_plan_file + ")");
  return {};
}

/// A resumed run: the plan from its directory; the driver skips what has a record.
std::string plan_resumed_run(const std::string& dir, run_driver_options& d) {
  rollout::run_plan plan;
  if (auto err = rollout::read_run_plan(dir, plan)) return "--resume: " + *err;
  std::string error;
  auto tasks = rollout::load_task_set(plan.tasks_dir, {}, error).tasks;
  if (!error.empty()) return "--resume: the plan's tasks: " + error;
  std::map<std::string, messages::task_spec> by_id;
  for (auto& t : tasks) by_id[t.task_id] = t;
  for (auto& e : plan.episodes) {
    auto it = by_id.find(e.task_id);
    if (it == by_id.end())
      return "--resume: task '" + e.task_id + "' of episode " + std::to_string(e.episode_id) + " is no longer in " +
             plan.tasks_dir;
    messages::start_episode s;
    s.episode_id = e.episode_id;
    s.task = it->second;
    s.mode = plan.mode;
    s.max_turns = plan.max_turns;
    s.wall_limit_ms = plan.wall_limit_ms;
    s.seed = e.seed;
    d.planned.push_back(std::move(s));
  }
  d.tasks = std::move(tasks);
  d.episodes = static_cast<int>(d.planned.size());
  d.mode = plan.mode;
  d.store_dir = dir;
  log_info("driver", "resuming the run in " + dir + ": " + std::to_string(d.episodes) + " planned " +
                         to_string(d.mode) + " episodes");
  return {};
}

}  // namespace

int run_episodes(caf::actor_system& sys, const cli_options& opts, const app_config& cfg, caf::actor coordinator,
                 exit_latch& latch) {
  run_driver_options d;
  auto error = opts.resume ? plan_resumed_run(*opts.resume, d) : plan_new_run(opts, cfg, d);
  if (!error.empty()) {
    log_error("caf-agent", error);
    return 2;
  }
  d.retry_aborted = cfg.rollout.retry_aborted;
  d.coordinator = coordinator;
  auto summary = std::make_shared<run_summary>();
  d.on_finished = [&latch, summary](const run_summary& s) {
    *summary = s;
    latch.finish(s.store_errors > 0 || !s.storage_error.empty() ? 1 : 0, "run finished");
  };
  auto driver = spawn_run_driver(sys, d, error);
  if (!driver) {
    log_error("caf-agent", error);
    return 2;
  }
  auto metrics = std::make_unique<metrics_log>(sys, coordinator, d.store_dir, cfg.observe.metrics_interval_ms);
  latch.wait();
  if (!latch.finished()) {
    // Every started episode still gets its one record (aborted, with the reason).
    caf::scoped_actor self{sys};
    self->request(driver, std::chrono::seconds(10), atoms::stop::value, latch.reason())
        .receive([](bool) {}, [](caf::error&) {});
  }
  metrics.reset();  // the last line: the run's final state
  caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
  std::map<std::string, int> level_of;
  for (auto& t : d.tasks) level_of[t.task_id] = t.level;
  rollout::scan_report scan;
  auto records = rollout::trajectory_store::read_all(d.store_dir, &scan);
  auto report = rollout::make_eval_report(records, level_of);
  std::printf("\n%s episodes: %zu records in %s\n%s", to_string(d.mode).c_str(), records.size(), d.store_dir.c_str(),
              rollout::format_eval_report(report).c_str());
  std::printf("evaluated on: gpu_pool device %s, %d slot(s)%s\n", to_string(cfg.gpu_pool.device).c_str(),
              cfg.gpu_pool.slots, gpu_names().empty() ? "" : (" (" + gpu_names() + ")").c_str());
  if (!summary->evaluations_per_pool.empty()) {
    std::printf("evaluations per GPU pool:\n");
    for (auto& [pool, n] : summary->evaluations_per_pool) std::printf("  %s: %lld\n", pool.c_str(), (long long)n);
  }
  if (summary->requeued > 0) std::printf("episodes re-queued from lost nodes: %d\n", summary->requeued);
  if (auto err = observe::write_run_report(d.store_dir, fs::path{d.store_dir} / "report.html"); err.empty())
    std::printf("run report: %s/report.html\n", d.store_dir.c_str());
  else
    log_error("driver", "no run report: " + err);
  std::fflush(stdout);
  if (!summary->storage_error.empty()) {
    log_error("driver", "the run failed: storage: " + summary->storage_error + "; kept " + summary->kept + " in " +
                            d.store_dir + " (resume with --resume " + d.store_dir + ")");
    return 4;
  }
  if (!latch.finished()) {
    log_error("driver", "interrupted (" + latch.reason() + ") before every episode ended");
    return latch.exit_code() == 0 ? 130 : latch.exit_code();
  }
  return latch.exit_code();
}

int run_local_main_job(caf::actor_system& sys, const cli_options& opts, const app_config& cfg,
                       const std::map<std::string, caf::actor>& peers, exit_latch& latch) {
  auto it = peers.find("coordinator");
  auto coord = it == peers.end() ? caf::actor{} : it->second;
  if (cfg.train.enabled && !opts.eval) return run_training(sys, cfg, coord, latch, true);
  if (opts.baselines) return run_baselines(sys, opts, cfg, peers, latch);
  return run_episodes(sys, opts, cfg, coord, latch);
}

}  // namespace caf_agent::runtime
