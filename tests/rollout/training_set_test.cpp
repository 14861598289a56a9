// Which stored trajectories each stage learns from, and the packed batch built from them.
#include "rollout/training_set.hpp"

#include <gtest/gtest.h>

namespace caf_agent::rollout {
namespace {

using messages::trajectory_record;

/// A finished episode with `sampled` sampled tokens after a 3-token prompt.
trajectory_record episode(uint64_t id, int32_t reward, int sampled = 2) {
  trajectory_record r;
  r.episode_id = id;
  r.reward = reward;
  r.termination = caf_agent::messages::episode_end::finished;
  r.tokens = {11, 12, 13};
  r.loss_mask = {0, 0, 0};
  r.logprobs = {0, 0, 0};
  for (int i = 0; i < sampled; ++i) {
    r.tokens.push_back(100 + i);
    r.loss_mask.push_back(1);
    r.logprobs.push_back(-0.5f * static_cast<float>(i + 1));
  }
  r.policy_versions = {id};
  return r;
}

std::string call(const std::string& command) {
  return "<tool_call>\n{\"name\": \"Bash\", \"arguments\": {\"command\": \"" + command + "\"}}\n</tool_call>";
}

TEST(training_set, infrastructure_failures_never_enter_a_batch) {
  std::vector<trajectory_record> recs = {episode(1, -1), episode(2, 3), episode(3, -1)};
  recs[2].termination = caf_agent::messages::episode_end::aborted;
  recs[2].abort_reason = "final evaluation: the GPU pool's node was lost";
  for (const char* stage : {"ppo", "rft", "vp"}) {
    const auto sel = select_for_training(recs, {.stage = *messages::parse_name<messages::learner_stage>(stage)});
    EXPECT_EQ(sel.dropped.at("infrastructure failure"), 1) << stage;
    for (const auto* r : sel.kept) EXPECT_NE(r->episode_id, 3U) << stage;
  }
  // PPO learns from failures of the policy (reward -1) too.
  EXPECT_EQ(select_for_training(recs, {.stage = messages::learner_stage::ppo}).kept.size(), 2U);
}

TEST(training_set, rft_keeps_only_clean_successes) {
  std::vector<trajectory_record> recs;
  recs.push_back(episode(1, 3));   // kept
  recs.push_back(episode(2, -1));  // failed
  recs.push_back(episode(3, 2));   // hit the turn limit
  recs.back().termination = caf_agent::messages::episode_end::turn_limit;
  recs.push_back(episode(4, 1));  // malformed call
  recs.back().malformed_tool_calls = 1;
  recs.push_back(episode(5, 3));  // the same call 4 times
  recs.back().turn_texts = {call("verify"), call("verify"), call("ls"), call("verify"), call("verify")};
  recs.push_back(episode(6, 2));  // 3 repeats: allowed
  recs.back().turn_texts = {call("verify"), call("verify"), call(" verify")};
  recs.push_back(episode(7, 3, 0));  // nothing sampled
  const auto sel = select_for_training(recs, {.stage = messages::learner_stage::rft, .max_repeats = 3});
  ASSERT_EQ(sel.kept.size(), 2U);
  EXPECT_EQ(sel.kept[0]->episode_id, 1U);
  EXPECT_EQ(sel.kept[1]->episode_id, 6U);
  EXPECT_EQ(sel.dropped.at("reward below the RFT threshold"), 1);
  EXPECT_EQ(sel.dropped.at("episode hit a limit (turn_limit)"), 1);
  EXPECT_EQ(sel.dropped.at("invalid tool-call pattern"), 1);
  EXPECT_EQ(sel.dropped.at("redundant loop (a tool call repeated)"), 1);
  EXPECT_EQ(sel.dropped.at("no sampled tokens"), 1);
}

TEST(training_set, repeated_calls_are_counted_by_name_and_arguments) {
  auto r = episode(1, 3);
  r.turn_texts = {call("nvcc a.cu") + "\n" + call("nvcc a.cu"), call("nvcc b.cu"), call("nvcc  a.cu")};
  // "nvcc  a.cu" differs inside the string only by whitespace, which the signature drops.
  EXPECT_EQ(max_repeated_tool_call(r), 3);
}

TEST(training_set, the_batch_is_the_records_tokens_as_stored) {
  std::vector<trajectory_record> recs = {episode(7, 3, 2), episode(9, -1, 1)};
  std::vector<const trajectory_record*> kept = {&recs[0], &recs[1]};
  const auto j = packed_batch_json(kept, messages::learner_stage::ppo);
  EXPECT_EQ(j["stage"], "ppo");
  EXPECT_EQ(j["tokens"], nlohmann::json({11, 12, 13, 100, 101, 11, 12, 13, 100}));
  EXPECT_EQ(j["seq_offsets"], nlohmann::json({0, 5, 9}));
  EXPECT_EQ(j["loss_mask"], nlohmann::json({0, 0, 0, 1, 1, 0, 0, 0, 1}));
  EXPECT_EQ(j["rewards"], nlohmann::json({3.0, -1.0}));
  EXPECT_EQ(j["episode_ids"], nlohmann::json({7, 9}));
  EXPECT_FLOAT_EQ(j["sampler_logp"][4].get<float>(), -1.0f);
  EXPECT_EQ(j["policy_versions"], nlohmann::json({{7}, {9}}));
}

TEST(training_set, records_older_than_the_lag_are_dropped_as_stale) {
  // The step starts from version 5: records sampled at 5, at 4, at 4 then 5 (a publication
  // mid-episode: its oldest version counts), at 3, and an aborted one at 2.
  std::vector<trajectory_record> recs = {episode(1, 1), episode(2, 1), episode(3, 1), episode(4, 1), episode(5, 1)};
  recs[0].policy_versions = {5, 5};
  recs[1].policy_versions = {4};
  recs[2].policy_versions = {4, 5};
  recs[3].policy_versions = {3, 3};
  recs[4].policy_versions = {2};
  recs[4].termination = caf_agent::messages::episode_end::aborted;
  const std::map<int32_t, std::vector<uint64_t>> kept_by_lag = {{0, {1}}, {1, {1, 2, 3}}, {2, {1, 2, 3, 4}}};
  for (const auto& [lag, want] : kept_by_lag) {
    const auto sel =
        select_for_training(recs, {.stage = messages::learner_stage::ppo, .max_policy_lag = lag, .base_version = 5});
    std::vector<uint64_t> kept;
    for (const auto* r : sel.kept) kept.push_back(r->episode_id);
    EXPECT_EQ(kept, want) << "max_policy_lag " << lag;
    EXPECT_EQ(sel.dropped.contains("stale") ? sel.dropped.at("stale") : 0, int64_t(4 - want.size())) << lag;
    // An infrastructure failure is counted as such, whatever its version.
    EXPECT_EQ(sel.dropped.at("infrastructure failure"), 1) << lag;
  }
  // No lag given (synchronous training, demonstrations, a stage's store): nothing is stale.
  EXPECT_EQ(select_for_training(recs, {.stage = messages::learner_stage::ppo, .base_version = 5}).kept.size(), 4U);
  // The first steps of a run: versions near 0 (no wrap-around below 0).
  std::vector<trajectory_record> first = {episode(1, 1)};
  first[0].policy_versions = {0};
  EXPECT_EQ(select_for_training(first, {.max_policy_lag = 1, .base_version = 1}).kept.size(), 1U);
  EXPECT_EQ(select_for_training(first, {.max_policy_lag = 2, .base_version = 0}).kept.size(), 1U);
  EXPECT_EQ(select_for_training(first, {.max_policy_lag = 0, .base_version = 1}).dropped.at("stale"), 1);
}

TEST(training_set, inconsistent_records_are_dropped_not_trained_on) {
  std::vector<trajectory_record> recs = {episode(1, 3)};
  recs[0].logprobs.pop_back();
  const auto sel = select_for_training(recs, {.stage = messages::learner_stage::ppo});
  EXPECT_TRUE(sel.kept.empty());
  EXPECT_EQ(sel.dropped.at("tokens, loss mask and logprobs differ in length"), 1);
}

}  // namespace
}  // namespace caf_agent::rollout
