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
  for (auto stage : cfg.train.stages) {
    auto& c = cfg.train.stage(stage);
    trainer_stage s;
    s.kind = stage;
    s.iterations = c.iterations;
    s.max_turns = c.max_turns > 0 ? c.max_turns : cfg.rollout.max_turns_train;
    s.min_reward = c.min_reward;
    s.max_repeats = c.max_repeats;
    s.store = c.store;
    s.min_explained_variance = c.min_explained_variance;
    s.max_steps = c.max_steps;
    s.stop_at_cap = c.stop_at_cap;
    s.demonstrations = c.demonstrations;
    s.steps_per_iteration = c.steps_per_iteration;
    s.batch_sequences = c.batch_sequences;
    s.temperature = static_cast<float>(c.temperature);
    s.schedule.kind = c.lr_schedule;
    s.schedule.lr = c.actor_lr > 0 ? c.actor_lr : cfg.learner.actor_lr;
    s.schedule.phases = c.lr_phases;
    s.schedule.warmup_steps = c.warmup_steps;
    s.schedule.total_steps = c.optimizer_steps();
    s.schedule.min_lr = c.min_lr;
    t.stages.push_back(std::move(s));
  }
  t.eval.episodes = cfg.train.eval.episodes;
  t.eval.temperature = static_cast<float>(cfg.train.eval.temperature);
  t.eval.max_turns = cfg.train.eval.max_turns > 0 ? cfg.train.eval.max_turns : cfg.rollout.max_turns_eval;
  t.episodes_per_iteration = cfg.train.episodes_per_iteration;
  t.run_dir = train_run_dir(cfg);
  t.wall_limit_ms = cfg.rollout.wall_limit_s * 1000;
  t.seed = cfg.policy.seed + 1;
  t.shards = in_process ? 1 : cfg.learner.shards;
  t.max_tokens_per_microbatch = cfg.learner.max_tokens_per_microbatch;
  t.stage_in_process = in_process && cfg.learner.weight_sync == learner::weight_sync_mode::automatic;
  t.max_step_attempts = cfg.train.max_step_attempts;
  t.max_empty_iterations = cfg.train.max_empty_iterations;
  t.retry_aborted = cfg.rollout.retry_aborted;
  t.async = cfg.train.async;
  t.max_policy_lag = cfg.train.max_policy_lag;
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
    latch.trigger(code, "training finished");
  };
  const auto run_dir = t.run_dir;
  log_info("train",
           "training " + std::to_string(t.stages.size()) + " stages, " + std::to_string(t.episodes_per_iteration) +
               " episodes per iteration, " + std::to_string(t.shards) + " learner shard(s), " +
               (t.async ? "asynchronous (max_policy_lag " + std::to_string(t.max_policy_lag) + "), " : std::string{}) +
               "weights " + (t.stage_in_process ? "handed to the in-process engine" : "published from disk") +
               "; run directory " + run_dir);
  auto trainer = spawn_trainer(sys, std::move(t), error);
  if (!trainer) {
    log_error("caf-agent", error);
    return 2;
  }
  latch.wait();
  if (latch.reason() != "training finished") {
    caf::scoped_actor self{sys};
    self->request(trainer, std::chrono::seconds(15), atoms::stop::value, latch.reason())
        .receive([](bool) {}, [](caf::error&) {});
  }
  caf::anon_send_exit(trainer, caf::exit_reason::user_shutdown);
  std::printf("\ntraining: %s\nrun directory: %s (train_state.json, iterations.jsonl, trajectories/, checkpoints/)\n",
              summary->empty() ? ("interrupted (" + latch.reason() + ")").c_str() : summary->c_str(), run_dir.c_str());
  std::fflush(stdout);
  if (latch.reason() != "training finished") return latch.exit_code() == 0 ? 130 : latch.exit_code();
  return latch.exit_code();
}

}  // namespace caf_agent::runtime
