// runtime/train_job.cpp: see train_job.hpp.
#include "runtime/train_job.hpp"

#include <filesystem>

#include <caf/all.hpp>

#include "actors/trainer.hpp"
#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "rollout/tasks.hpp"
#include "runtime/learner_role.hpp"

namespace caf_agent::runtime {

namespace fs = std::filesystem;

trainer_options trainer_options_of(const app_config& cfg, bool in_process) {
  trainer_options t;
  t.train = cfg.train;
  t.train.run_dir = train_run_dir(cfg);
  t.rollout = cfg.rollout;
  t.learner = cfg.learner;
  if (in_process) t.learner.shards = 1;  // the local role's one shard
  t.seed = cfg.policy.seed + 1;
  t.stage_in_process = in_process && cfg.learner.weight_sync == learner::weight_sync_mode::automatic;
  t.settings = training_settings(cfg);
  return t;
}

int run_training(caf::actor_system& sys, const app_config& cfg, caf::actor coordinator, exit_latch& latch,
                 bool in_process) {
  auto t = trainer_options_of(cfg, in_process);
  std::string error;
  t.tasks = rollout::load_tasks(cfg.rollout.tasks_dir, error);
  if (!error.empty()) {
    log_error("caf-agent", "rollout.tasks_dir: " + error);
    return 2;
  }
  t.coordinator = coordinator;
  auto summary = std::make_shared<std::string>();
  t.on_finished = [&latch, summary](int code, const std::string& text) {
    *summary = text;
    latch.finish(code, "training finished");
  };
  const auto run_dir = t.train.run_dir;
  log_info("train",
           "training " + std::to_string(t.train.stages.size()) + " stages, " +
               std::to_string(t.train.episodes_per_iteration) + " episodes per iteration, " +
               std::to_string(t.learner.shards) + " learner shard(s), " +
               (t.train.async ? "asynchronous (max_policy_lag " + std::to_string(t.train.max_policy_lag) + "), "
                              : std::string{}) +
               "weights " + (t.stage_in_process ? "handed to the in-process engine" : "published from disk") +
               "; run directory " + run_dir);
  auto trainer = spawn_trainer(sys, std::move(t), error);
  if (!trainer) {
    log_error("caf-agent", error);
    return 2;
  }
  latch.wait();
  if (!latch.finished()) {
    caf::scoped_actor self{sys};
    self->request(trainer, std::chrono::seconds(15), atoms::stop::value, latch.reason())
        .receive([](bool) {}, [](caf::error&) {});
  }
  caf::anon_send_exit(trainer, caf::exit_reason::user_shutdown);
  std::printf("\ntraining: %s\nrun directory: %s (train_state.json, iterations.jsonl, trajectories/, checkpoints/)\n",
              summary->empty() ? ("interrupted (" + latch.reason() + ")").c_str() : summary->c_str(), run_dir.c_str());
  std::fflush(stdout);
  if (!latch.finished()) return latch.exit_code() == 0 ? 130 : latch.exit_code();
  return latch.exit_code();
}

}  // namespace caf_agent::runtime
