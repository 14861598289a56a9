// runtime/main_job.cpp: the run itself: episodes over the tasks, then the report.
#include <filesystem>

#include <caf/all.hpp>

#include "actors/log.hpp"
#include "actors/run_driver.hpp"
#include "messages/type_ids.hpp"
#include "rollout/eval_report.hpp"
#include "rollout/tasks.hpp"
#include "rollout/trajectory_store.hpp"
#include "runtime/local_job.hpp"

namespace caf_agent::runtime {

namespace {

std::string store_dir_for(const app_config& cfg) {
  auto stamp = std::to_string(unix_ms());
  return cfg.runtime.run_dir + "/trajectories-" + stamp;
}

}  // namespace

int run_episodes(caf::actor_system& sys, const cli_options& opts, const app_config& cfg,
                 caf::actor coordinator, exit_latch& latch) {
  std::string error;
  auto tasks = rollout::load_tasks(cfg.rollout.tasks_dir, error);
  if (!error.empty()) {
    log_error("caf-agent", error);
    return 2;
  }
  run_driver_options d;
  d.tasks = tasks;
  d.episodes = cfg.rollout.episodes > 0 ? cfg.rollout.episodes
                                         : static_cast<int>(tasks.size()) * cfg.rollout.attempts;
  d.mode = opts.eval ? "eval" : cfg.rollout.mode;
  d.max_turns = d.mode == "eval" ? cfg.rollout.max_turns_eval : cfg.rollout.max_turns_train;
  d.wall_limit_ms = cfg.rollout.wall_limit_s * 1000;
  d.store_dir = store_dir_for(cfg);
  d.coordinator = coordinator;
  d.on_finished = [&latch](const run_summary& s) {
    latch.trigger(s.store_errors > 0 ? 1 : 0, "run finished");
  };
  log_info("driver", "running " + std::to_string(d.episodes) + " " + d.mode + " episodes over " +
                         std::to_string(tasks.size()) + " tasks from " + cfg.rollout.tasks_dir);
  auto driver = spawn_run_driver(sys, d, error);
  if (!driver) {
    log_error("caf-agent", error);
    return 2;
  }
  latch.wait();
  if (latch.reason() != "run finished") {
    // Every started episode still gets its one record (aborted, with the reason).
    caf::scoped_actor self{sys};
    self->request(driver, std::chrono::seconds(10), atoms::stop::value, latch.reason())
        .receive([](bool) {}, [](caf::error&) {});
  }
  caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
  std::map<std::string, int> level_of;
  for (auto& t : tasks) level_of[t.task_id] = t.level;
  rollout::scan_report scan;
  auto records = rollout::trajectory_store::read_all(d.store_dir, &scan);
  auto report = rollout::make_eval_report(records, level_of);
  std::printf("\n%s episodes: %zu records in %s\n%s", d.mode.c_str(), records.size(),
              d.store_dir.c_str(), rollout::format_eval_report(report).c_str());
  std::fflush(stdout);
  if (latch.reason() != "run finished") {
    log_error("driver", "interrupted (" + latch.reason() + ") before every episode ended");
    return latch.exit_code() == 0 ? 130 : latch.exit_code();
  }
  return latch.exit_code();
}

int run_local_main_job(caf::actor_system& sys, const cli_options& opts, const app_config& cfg,
                       const std::map<std::string, caf::actor>& peers, exit_latch& latch) {
  auto it = peers.find("coordinator");
  return run_episodes(sys, opts, cfg, it == peers.end() ? caf::actor{} : it->second, latch);
}

}  // namespace caf_agent::runtime
