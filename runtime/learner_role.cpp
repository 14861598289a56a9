// runtime/learner_role.cpp: see learner_role.hpp.
#include "runtime/learner_role.hpp"

#include <filesystem>

#include <caf/all.hpp>

#include "base/log.hpp"
#include "messages/type_ids.hpp"

#ifdef CAF_AGENT_HAS_LEARNER
#include "actors/learner_shard.hpp"
#endif

namespace caf_agent::runtime {

namespace fs = std::filesystem;

namespace {

std::string model_of(const app_config& cfg) {
  return cfg.learner.model_dir.empty() ? cfg.policy.model_dir : cfg.learner.model_dir;
}

}  // namespace

nlohmann::json training_settings(const app_config& cfg) {
  auto& l = cfg.learner;
  nlohmann::json stages = nlohmann::json::object();
  for (auto kind : cfg.train.stages) {
    const auto name = to_string(kind);
    auto& s = cfg.train.stage(kind);
    stages[name] = {{"iterations", s.iterations}, {"max_turns", s.max_turns},
                    {"min_reward", s.min_reward}, {"max_repeats", s.max_repeats},
                    {"store", s.store},           {"min_explained_variance", s.min_explained_variance},
                    {"max_steps", s.max_steps}};
    // Only when set, so run directories of configs without them stay valid.
    auto& j = stages[name];
    if (!s.demonstrations.empty()) j["demonstrations"] = fs::absolute(s.demonstrations).lexically_normal().string();
    if (s.steps_per_iteration != 1) j["steps_per_iteration"] = s.steps_per_iteration;
    if (s.batch_sequences != 0) j["batch_sequences"] = s.batch_sequences;
    if (s.actor_lr != 0) j["actor_lr"] = s.actor_lr;
    if (s.lr_schedule != learner::lr_schedule_kind::constant) j["lr_schedule"] = to_string(s.lr_schedule);
    if (!s.lr_phases.empty()) j["lr_phases"] = s.lr_phases;
    if (s.warmup_steps != 0) j["warmup_steps"] = s.warmup_steps;
    if (s.min_lr != 0) j["min_lr"] = s.min_lr;
    if (s.temperature >= 0) j["temperature"] = s.temperature;
  }
  nlohmann::json out = {{"train.stages", cfg.train.stages},
                        {"train.episodes_per_iteration", cfg.train.episodes_per_iteration},
                        {"train.stage", stages},

                        {"learner.model_dir", fs::absolute(model_of(cfg)).lexically_normal().string()},
                        {"rollout.tasks_dir", fs::absolute(cfg.rollout.tasks_dir).lexically_normal().string()},
                        {"learner.shards", l.shards},
                        {"learner.actor_lr", l.actor_lr},
                        {"learner.critic_lr", l.critic_lr},
                        {"learner.clip_low", l.clip_low},
                        {"learner.clip_high", l.clip_high},
                        {"learner.gamma", l.gamma},
                        {"learner.gae_lambda", l.gae_lambda},
                        {"learner.ppo_epochs", l.ppo_epochs},
                        {"learner.entropy_coef", l.entropy_coef},
                        {"learner.normalize_advantages", l.normalize_advantages},
                        {"learner.compute_dtype", to_string(l.compute_dtype)}};
  if (cfg.train.eval.episodes > 0)
    out["train.eval"] = {{"episodes", cfg.train.eval.episodes},
                         {"temperature", cfg.train.eval.temperature},
                         {"max_turns", cfg.train.eval.max_turns}};
  return out;
}

std::string start_learner_role(caf::actor_system& sys, const app_config& cfg, const std::string& node_id,
                               const std::map<std::string, caf::actor>& peers, role_actors& out) {
#ifdef CAF_AGENT_HAS_LEARNER
  auto l = cfg.learner;
  // Rationale: the local role is one process, so one shard: the whole batch, no rendezvous.
  if (peers.contains("local")) l.shards = 1, l.rank = 0;
  if (l.rank < 0 || l.rank >= l.shards)
    return "--shard " + std::to_string(l.rank) + " is outside 0.." + std::to_string(l.shards - 1) +
           " (learner.shards = " + std::to_string(l.shards) + ")";
  learner::shard_options o{l};
  o.model_dir = model_of(cfg);
  o.checkpoint_root = (fs::path{train_run_dir(cfg)} / "checkpoints").string();
  o.temperature = cfg.policy.temperature > 0 ? cfg.policy.temperature : 1.0;
  auto shard = spawn_learner_shard(sys, o, node_id);
  out.actors.push_back(shard);
  out.named["learner_shard"] = shard;
  out.counts["learner_shards"] = 1;
  out.notes.push_back("learner shard " + std::to_string(l.rank) + "/" + std::to_string(l.shards) + " (" +
                      to_string(l.backend) + " on " + l.device + ") training " +
                      (o.model_dir.empty() ? "(no model configured)" : o.model_dir));
  log_info("learner", out.notes.back());
  auto it = peers.find("coordinator");
  if (it != peers.end())
    caf::send_as(shard, it->second,
                 messages::service_announce{node_id, messages::service_name(messages::service_kind::learner, l.rank)});
  return {};
#else
  out.counts["learner_shards"] = 0;
  out.notes.push_back("learner: this build has no LibTorch; no shard runs here");
  return {};
#endif
}

}  // namespace caf_agent::runtime
