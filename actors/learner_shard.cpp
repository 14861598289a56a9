// actors/learner_shard.cpp: see learner_shard.hpp.
#include "actors/learner_shard.hpp"

#include <caf/all.hpp>

#include "base/log.hpp"
#include "messages/type_ids.hpp"
#include "rollout/shard_batches.hpp"

namespace caf_agent {

namespace {

using namespace messages;

struct shard_state {
  learner::shard_options options;
  std::string node_id;
  std::unique_ptr<learner::shard_session> session;
  std::string create_error;
  static inline const char* name = "learner_shard";
};

using shard_actor = caf::stateful_actor<shard_state>;

learner::shard_batch batch_of(train_batch& b, std::vector<learner::step_plan> steps) {
  return {to_string(b.stage),
          std::move(b.tokens),
          std::move(b.seq_offsets),
          std::move(b.loss_mask),
          std::move(b.sampler_logp),
          std::move(b.rewards),
          std::move(b.actor_lrs),
          b.temperature,
          std::move(steps),
          b.rank,
          b.shards,
          b.max_tokens_per_microbatch};
}

train_step_done run_step(shard_actor* self, train_batch& b) {
  auto& st = self->state;
  train_step_done done;
  done.batch_id = b.batch_id;
  done.attempt = b.attempt;
  done.rank = static_cast<int32_t>(st.options.rank);
  done.node_id = st.node_id;
  if (!st.session) {
    done.error = st.create_error;
    return done;
  }
  learner::shard_step step{b.base_version, b.base_checkpoint, b.new_version, b.generation, true, b.stage_in_process};
  const auto episodes = b.episode_ids.size();
  auto plan = rollout::plan_of(b);
  if (!plan) {
    done.error = plan.error().message;
    log_error("learner", "batch " + std::to_string(done.batch_id) + ": " + done.error);
    return done;
  }
  auto out = st.session->run(batch_of(b, std::move(plan.value())), step);
  done.policy_version = st.session->version();
  if (!out) {
    done.error = out.error().message;
    log_error("learner", "step of batch " + std::to_string(done.batch_id) + " (attempt " +
                             std::to_string(done.attempt) + ") failed: " + done.error);
    return done;
  }
  auto& o = out.value();
  done.applied = o.applied;
  done.skip_reason = o.skip_reason;
  done.policy_loss = o.policy_loss;
  done.value_loss = o.value_loss;
  done.explained_variance = o.explained_variance;
  done.entropy = o.entropy;
  done.sampled_tokens = o.sampled_tokens;
  done.checkpoint = o.checkpoint;
  done.in_process_path = o.in_process_path;
  done.report_json = o.report_json;
  done.prepare_s = o.prepare_seconds;
  done.step_s = o.step_seconds;
  done.save_s = o.save_seconds;
  done.stage_s = o.stage_seconds;
  done.optimizer_steps = static_cast<int32_t>(o.optimizer_steps);
  done.nll = o.nll_mean;
  log_info("learner", "shard " + std::to_string(done.rank) + ": batch " + std::to_string(done.batch_id) + " (" +
                          to_string(b.stage) + ", " + std::to_string(episodes) + " episodes, " +
                          std::to_string(o.optimizer_steps) + " optimizer steps) -> version " +
                          std::to_string(done.policy_version) + (o.applied ? "" : " (skipped: " + o.skip_reason + ")") +
                          (o.reloaded ? ", base version reloaded" : ""));
  return done;
}

caf::behavior shard(shard_actor* self, learner::shard_options options, std::string node_id) {
  auto& st = self->state;
  st.options = std::move(options);
  st.node_id = std::move(node_id);
  auto created = learner::shard_session::create(st.options);
  if (created)
    st.session = std::move(created.value());
  else
    st.create_error = created.error().message;
  if (!st.create_error.empty()) log_error("learner", st.create_error);
  return {
      [=](train_batch& b) {
        // Answered as a message of its own: the trainer matches batch and attempt, so a late
        // answer to a step it already gave up on is recognised and ignored.
        auto to = caf::actor_cast<caf::actor>(self->current_sender());
        auto done = run_step(self, b);
        if (to) self->send(to, std::move(done));
      },
      [=](atoms::stats) -> std::map<std::string, double> {
        return {{"rank", double(self->state.options.rank)},
                {"version", self->state.session ? double(self->state.session->version()) : 0.0}};
      },
  };
}

}  // namespace

caf::actor spawn_learner_shard(caf::actor_system& sys, learner::shard_options options, std::string node_id) {
  return sys.spawn<caf::detached>(shard, std::move(options), std::move(node_id));
}

}  // namespace caf_agent
