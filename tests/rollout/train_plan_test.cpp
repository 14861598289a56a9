// tests/rollout/train_plan_test.cpp: the trainer's stage state, its persistence and resume.
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

#include <gtest/gtest.h>

#include "rollout/train_plan.hpp"

using namespace caf_agent::rollout;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("caf_agent_train_plan_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

/// What a killed trainer has after a restart: the state as last written.
train_state reload(const fs::path& dir) {
  std::optional<train_state> s;
  auto err = read_train_state(dir, s);
  EXPECT_FALSE(err) << *err;
  EXPECT_TRUE(s.has_value());
  return s ? *s : train_state{};
}

consumed_batch batch_of(const train_state& s, const std::string& stage) {
  return {0, stage, s.policy_version + 1, s.pending, static_cast<int64_t>(s.pending.size()), {}};
}

}  // namespace

TEST(train_plan, iterations_plan_fresh_ids_and_commit_them_once) {
  train_state s;
  EXPECT_EQ(plan_iteration(s, 3), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(plan_iteration(s, 3), (std::vector<uint64_t>{1, 2, 3}));  // still in progress: the same
  commit_iteration(s, batch_of(s, "agentic_ppo"), true, "ck/step-1");
  EXPECT_EQ(s.policy_version, 1U);
  EXPECT_EQ(s.stage_step, 1);
  EXPECT_EQ(s.checkpoint, "ck/step-1");
  EXPECT_TRUE(s.pending.empty());
  EXPECT_EQ(plan_iteration(s, 3), (std::vector<uint64_t>{4, 5, 6}));
  commit_iteration(s, batch_of(s, "agentic_ppo"), false, {});  // no training data: no step
  EXPECT_EQ(s.policy_version, 1U);
  EXPECT_EQ(s.stage_step, 1);
  EXPECT_EQ(s.empty_iterations, 1);
  EXPECT_EQ(s.consumed.back().policy_version, 1U);
  EXPECT_EQ(consumed_ids(s), (std::vector<uint64_t>{1, 2, 3, 4, 5, 6}));
}

TEST(train_plan, a_trainer_killed_at_any_point_consumes_every_episode_exactly_once) {
  // Kill points: after planning (before any record), and after the step but before the commit
  // was written. Each restart reads the state file as the killed process left it.
  const auto dir = fresh_dir("kill");
  train_state s;
  s.settings = {{"train.episodes_per_iteration", 4}};
  ASSERT_FALSE(write_train_state(dir, s));
  for (int iteration = 0; iteration < 5; ++iteration) {
    plan_iteration(s, 4);
    ASSERT_FALSE(write_train_state(dir, s));  // the trainer writes the plan before playing
    if (iteration == 1) s = reload(dir);      // killed while playing: resumes the same ids
    EXPECT_EQ(s.pending.size(), 4U);
    auto before_commit = s;
    commit_iteration(s, batch_of(s, "agentic_ppo"), true, "ck");
    if (iteration == 3) {  // killed after the step, before writing: the step is taken again
      s = reload(dir);
      EXPECT_EQ(s.pending, before_commit.pending);
      commit_iteration(s, batch_of(s, "agentic_ppo"), true, "ck");
    }
    ASSERT_FALSE(write_train_state(dir, s));
  }
  s = reload(dir);
  auto ids = consumed_ids(s);
  std::vector<uint64_t> expected(20);
  for (uint64_t i = 0; i < 20; ++i) expected[i] = i + 1;
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(s.policy_version, 5U);
  EXPECT_EQ(s.iteration, 5U);
  fs::remove_all(dir);
}

TEST(train_plan, an_asynchronous_trainer_killed_at_any_point_consumes_every_episode_exactly_once) {
  // train.async: iteration k + 1 is planned (and written) while k's step runs. Kill points:
  // while both play, after k's commit was written (before k + 1 became the one in progress),
  // and after k's step but before its commit was written.
  const auto dir = fresh_dir("ahead");
  train_state s;
  ASSERT_FALSE(write_train_state(dir, s));
  for (int iteration = 0; iteration < 6; ++iteration) {
    const auto ids = plan_iteration(s, 3);
    if (iteration > 0) {
      EXPECT_TRUE(s.ahead.empty());  // the one played ahead became the current one
    }
    ASSERT_FALSE(write_train_state(dir, s));
    const auto ahead = plan_ahead(s, 3);
    EXPECT_EQ(ahead.front(), ids.back() + 1);
    ASSERT_FALSE(write_train_state(dir, s));  // the trainer writes the plan before playing ahead
    if (iteration == 1) {                     // killed while both play: the same ids, both
      s = reload(dir);
      EXPECT_EQ(s.pending, ids);
      EXPECT_EQ(plan_ahead(s, 3), ahead);
    }
    auto before_commit = s;
    commit_iteration(s, batch_of(s, "agentic_ppo"), true, "ck");
    EXPECT_EQ(s.ahead, ahead);
    if (iteration == 3) {  // killed after the step, before writing: the step is taken again
      s = reload(dir);
      EXPECT_EQ(s.pending, before_commit.pending);
      EXPECT_EQ(s.ahead, ahead);
      commit_iteration(s, batch_of(s, "agentic_ppo"), true, "ck");
    }
    ASSERT_FALSE(write_train_state(dir, s));
    if (iteration == 4) {  // killed after the commit: the iteration played ahead comes next
      s = reload(dir);
      EXPECT_TRUE(s.pending.empty());
      EXPECT_EQ(plan_iteration(s, 3), ahead);
    }
  }
  // The last iteration of a stage plays nothing ahead: the state drains.
  plan_iteration(s, 3);
  commit_iteration(s, batch_of(s, "agentic_ppo"), true, "ck");
  ASSERT_FALSE(write_train_state(dir, s));
  s = reload(dir);
  EXPECT_TRUE(s.pending.empty() && s.ahead.empty());
  std::vector<uint64_t> expected(21);
  for (uint64_t i = 0; i < 21; ++i) expected[i] = i + 1;
  EXPECT_EQ(consumed_ids(s), expected);
  EXPECT_EQ(s.next_episode_id, 22U);
  fs::remove_all(dir);
}

TEST(train_plan, stopping_rules) {
  EXPECT_EQ(stage_stop_reason(stage_kind::agentic_ppo, 1, 2, 0, 0.6, 20), std::nullopt);
  EXPECT_EQ(stage_stop_reason(stage_kind::agentic_ppo, 2, 2, 0, 0.6, 20), stage_end::iterations);
  EXPECT_EQ(stage_stop_reason(stage_kind::rft, 1, 1, 0, 0.6, 20), stage_end::iterations);
  EXPECT_EQ(stage_stop_reason(stage_kind::value_pretrain, 1, 1, 0.59, 0.6, 3),
            std::nullopt);  // iterations do not apply
  EXPECT_EQ(stage_stop_reason(stage_kind::value_pretrain, 2, 1, 0.61, 0.6, 3), stage_end::gate);
  EXPECT_EQ(stage_stop_reason(stage_kind::value_pretrain, 3, 1, 0.2, 0.6, 3), stage_end::cap);
  train_state s;
  s.stage_step = 3;
  s.store_cursor = 8;
  advance_stage(s, stage_kind::value_pretrain, stage_end::cap, 0.2);
  EXPECT_EQ(s.stage_index, 1U);
  EXPECT_EQ(s.stage_step, 0);
  EXPECT_EQ(s.store_cursor, 0);
  ASSERT_EQ(s.stages_done.size(), 1U);
  EXPECT_EQ(s.stages_done[0].steps, 3);
  EXPECT_EQ(s.stages_done[0].outcome, stage_end::cap);
  EXPECT_EQ(name_of(learner_stage(stage_kind::single_turn_ppo)), "ppo");
  EXPECT_EQ(name_of(learner_stage(stage_kind::value_pretrain)), "vp");
}

TEST(train_plan, state_round_trips_and_bad_files_are_named) {
  const auto dir = fresh_dir("io");
  train_state s;
  s.settings = {{"learner.actor_lr", 3e-6}, {"train.stages", {"rft", "agentic_ppo"}}};
  plan_iteration(s, 2);
  commit_iteration(s, {0, "rft", 1, s.pending, 1, {{"reward below the RFT threshold", 1}}}, true, "ck/1");
  advance_stage(s, stage_kind::rft, stage_end::iterations, 0);
  plan_iteration(s, 2);
  ASSERT_FALSE(write_train_state(dir, s));
  auto back = reload(dir);
  EXPECT_EQ(to_json(back), to_json(s));
  EXPECT_EQ(back.consumed.at(0).dropped.at("reward below the RFT threshold"), 1);
  plan_ahead(s, 2);
  ASSERT_FALSE(write_train_state(dir, s));
  EXPECT_EQ(reload(dir).ahead, s.ahead);

  // A format 2 file (before `ahead`) reads with nothing played ahead and is written back as 3.
  auto old = to_json(s);
  old.erase("ahead");
  old["format_version"] = 2;
  std::ofstream(dir / train_state_file) << old.dump();
  back = reload(dir);
  EXPECT_TRUE(back.ahead.empty());
  EXPECT_EQ(back.pending, s.pending);
  EXPECT_EQ(back.format_version, train_state_format_version);

  // A stage's outcome is written and read as its name (the strings the field held before it was
  // an enum); a name not in the list is named.
  auto named = to_json(s);
  EXPECT_EQ(named["stages_done"][0]["outcome"], "iterations");
  named["stages_done"][0]["outcome"] = "gate";
  std::ofstream(dir / train_state_file) << named.dump();
  EXPECT_EQ(reload(dir).stages_done.at(0).outcome, stage_end::gate);
  named["stages_done"][0]["outcome"] = "stalled";
  std::ofstream(dir / train_state_file) << named.dump();
  std::optional<train_state> unnamed;
  auto unnamed_err = read_train_state(dir, unnamed);
  ASSERT_TRUE(unnamed_err);
  EXPECT_NE(unnamed_err->find("'stalled' is not one of: iterations, gate, cap"), std::string::npos) << *unnamed_err;

  std::ofstream(dir / train_state_file) << "{\"format_version\": 1}";
  std::optional<train_state> out;
  auto err = read_train_state(dir, out);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find(train_state_file), std::string::npos) << *err;
  std::ofstream(dir / train_state_file) << "{\"format_version\": 99}";
  err = read_train_state(dir, out);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("format_version 99"), std::string::npos) << *err;
  fs::remove_all(dir);
  EXPECT_FALSE(read_train_state(dir, out));  // none yet: no error, no state
  EXPECT_FALSE(out.has_value());
}

TEST(train_plan, another_config_is_named_by_its_first_differing_setting) {
  nlohmann::json a = {{"learner.actor_lr", 3e-6}, {"train.stage", {{"rft", {{"min_reward", 1}}}}}};
  EXPECT_EQ(settings_mismatch(a, a), "");
  auto b = a;
  b["train.stage"]["rft"]["min_reward"] = 2;
  EXPECT_EQ(settings_mismatch(a, b), "train.stage.rft.min_reward: the run directory's 1, this config: 2");
  auto c = a;
  c["rollout.tasks_dir"] = "/x";
  EXPECT_NE(settings_mismatch(a, c).find("rollout.tasks_dir"), std::string::npos);
}

// The trainer takes [train] as read (trainer_options::train): a stage's or round's 0 stands for
// the [rollout] / [learner] setting, resolved where it is used, not copied into another struct.
TEST(train_plan, a_stage_resolves_its_defaults_from_the_sections_it_names) {
  train_config t;
  EXPECT_EQ(t.agentic_ppo.turn_limit(150), 150);  // max_turns = 0: rollout.max_turns_train
  EXPECT_EQ(t.single_turn_ppo.turn_limit(150), 1);
  t.rft.max_turns = 40;
  EXPECT_EQ(t.rft.turn_limit(150), 40);
  EXPECT_EQ(t.eval.turn_limit(200), 200);  // rollout.max_turns_eval
  t.eval.max_turns = 7;
  EXPECT_EQ(t.eval.turn_limit(200), 7);

  auto constant = t.agentic_ppo.schedule(3e-6);  // actor_lr = 0: learner.actor_lr
  EXPECT_EQ(constant.kind, caf_agent::learner::lr_schedule_kind::constant);
  EXPECT_DOUBLE_EQ(constant.at(0), 3e-6);
  auto& s = t.agentic_ppo;
  s.iterations = 2;
  s.steps_per_iteration = 3;
  s.actor_lr = 1e-5;
  s.lr_schedule = caf_agent::learner::lr_schedule_kind::cosine;
  s.warmup_steps = 2;
  s.min_lr = 1e-6;
  auto cosine = s.schedule(3e-6);
  EXPECT_EQ(cosine.total_steps, 6);  // iterations x steps_per_iteration
  EXPECT_EQ(cosine.warmup_steps, 2);
  EXPECT_DOUBLE_EQ(cosine.lr, 1e-5);
  EXPECT_DOUBLE_EQ(cosine.at(2), 1e-5);  // the peak after the warm-up
  EXPECT_DOUBLE_EQ(cosine.at(6), 1e-6);
  EXPECT_TRUE(static_cast<bool>(cosine.validate()));
}
