// The trainer's per-shard train_batch messages: each holds only the trajectories its plan uses,
// copied whole, and its plan reads back as learner/batch_plan made it.

#include "rollout/shard_batches.hpp"

#include <gtest/gtest.h>

namespace caf_agent::rollout {
namespace {

// 6 trajectories of lengths 9 5 7 3 6 8; token values name their trajectory (100 * i + t).
messages::train_batch whole_batch() {
  messages::train_batch b;
  b.batch_id = 4;
  b.base_version = 3;
  b.new_version = 4;
  b.actor_lrs = {1e-6, 2e-6};
  b.temperature = 0.7;
  b.seq_offsets = {0};
  const std::vector<int64_t> lengths{9, 5, 7, 3, 6, 8};
  for (size_t i = 0; i < lengths.size(); ++i) {
    for (int64_t t = 0; t < lengths[i]; ++t) {
      b.tokens.push_back(static_cast<int32_t>(100 * i + t));
      b.loss_mask.push_back(t > 0 ? 1 : 0);
      b.sampler_logp.push_back(-0.01f * static_cast<float>(100 * i + t));
    }
    b.seq_offsets.push_back(static_cast<int64_t>(b.tokens.size()));
    b.rewards.push_back(static_cast<float>(i) - 2.5f);
    b.episode_ids.push_back(1000 + i);
  }
  return b;
}

TEST(ShardBatches, EachShardGetsOnlyItsTrajectoriesWholeAndItsPlanReadsBack) {
  const auto whole = whole_batch();
  const slice_options o{.sequences_per_step = 4, .sequence_cursor = 2, .max_tokens_per_microbatch = 12, .shards = 2};
  auto batches = shard_batches(whole, o);
  ASSERT_TRUE(batches) << batches.error().message;
  ASSERT_EQ(batches->size(), 2u);
  std::vector<int64_t> lengths{9, 5, 7, 3, 6, 8}, sampled{8, 4, 6, 2, 5, 7};
  std::vector<double> rewards{-2.5, -1.5, -0.5, 0.5, 1.5, 2.5};
  auto expected = learner::plan_batch(lengths, sampled, rewards, {2, 4, 2, 12, 2});
  ASSERT_TRUE(expected) << expected.error().message;
  size_t tokens = 0;
  for (size_t rank = 0; rank < 2; ++rank) {
    const auto& b = (*batches)[rank];
    const auto& slice = (*expected)[rank];
    EXPECT_EQ(b.rank, static_cast<int32_t>(rank));
    EXPECT_EQ(b.shards, 2);
    EXPECT_EQ(b.max_tokens_per_microbatch, 12);
    EXPECT_EQ(b.batch_id, 4u);
    EXPECT_EQ(b.actor_lrs, whole.actor_lrs);
    EXPECT_EQ(b.temperature, whole.temperature);
    ASSERT_EQ(b.episode_ids.size(), slice.sequences.size());
    ASSERT_LT(slice.sequences.size(), 6u) << "a shard holds part of the batch";
    tokens += b.tokens.size();
    for (size_t l = 0; l < slice.sequences.size(); ++l) {
      const auto g = static_cast<size_t>(slice.sequences[l]);
      EXPECT_EQ(b.episode_ids[l], 1000 + g);
      EXPECT_EQ(b.rewards[l], whole.rewards[g]);
      const auto from = b.seq_offsets[l], to = b.seq_offsets[l + 1];
      ASSERT_EQ(to - from, lengths[g]);
      for (int64_t t = 0; t < to - from; ++t) {
        EXPECT_EQ(b.tokens[static_cast<size_t>(from + t)], static_cast<int32_t>(100 * g + static_cast<size_t>(t)));
        EXPECT_EQ(b.loss_mask[static_cast<size_t>(from + t)], t > 0 ? 1 : 0);
        EXPECT_EQ(b.sampler_logp[static_cast<size_t>(from + t)], whole.sampler_logp[whole.seq_offsets[g] + t]);
      }
    }
    auto plan = plan_of(b);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ((*plan)[i].microbatches, slice.steps[i].microbatches);
      EXPECT_EQ((*plan)[i].sequences, 4);
      EXPECT_EQ((*plan)[i].sampled_tokens, slice.steps[i].sampled_tokens);
      EXPECT_EQ((*plan)[i].tokens, slice.steps[i].tokens);
      EXPECT_DOUBLE_EQ((*plan)[i].reward_sum, slice.steps[i].reward_sum);
    }
  }
  EXPECT_EQ(tokens, whole.tokens.size()) << "each of the 6 trajectories is in one shard's batch here";
}

TEST(ShardBatches, AFlattenedPlanThatDoesNotAddUpIsAnErrorSayingWhat) {
  auto batches = shard_batches(whole_batch(), {.max_tokens_per_microbatch = 12, .shards = 2});
  ASSERT_TRUE(batches) << batches.error().message;
  auto b = (*batches)[0];
  ASSERT_TRUE(plan_of(b));
  auto past = b;
  past.plan_sequences.back() = 99;
  ASSERT_FALSE(plan_of(past));
  EXPECT_NE(plan_of(past).error().message.find("names trajectory 99"), std::string::npos);
  auto left = b;
  left.plan_sequences.push_back(0);
  ASSERT_FALSE(plan_of(left));
  EXPECT_NE(plan_of(left).error().message.find("left over"), std::string::npos);
  auto totals = b;
  totals.step_tokens.clear();
  ASSERT_FALSE(plan_of(totals));
  EXPECT_NE(plan_of(totals).error().message.find("totals"), std::string::npos);
  auto whole = whole_batch();
  whole.rewards.pop_back();
  auto bad = shard_batches(whole, {});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("6 trajectories, 5 rewards"), std::string::npos);
}

}  // namespace
}  // namespace caf_agent::rollout
