// Each shard's slice of an iteration's steps: every trajectory of every step goes to exactly one
// shard, as the packing deals it, and the shard's local indices name the right trajectories.

#include "learner/batch_plan.hpp"

#include <map>
#include <set>

#include <gtest/gtest.h>

namespace caf_agent::learner {
namespace {

// The trajectories a step trains, in the batch's indices, from the round robin's rule.
std::vector<int64_t> selection(int64_t n, int64_t per_step, int64_t cursor, int64_t step) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < per_step; ++k) out.push_back((cursor + step * per_step + k) % n);
  return out;
}

TEST(BatchPlan, EveryTrajectoryOfEveryStepGoesToExactlyOneShardAsThePackingDealsIt) {
  const std::vector<int64_t> lengths{5, 3, 8, 2, 4, 7, 1, 6, 9};
  const std::vector<int64_t> sampled{2, 1, 5, 0, 3, 4, 1, 2, 6};
  const std::vector<double> rewards{1, 0, -1, 0.5, 1, 0, 1, -1, 0.25};
  const batch_plan_options o{
      .steps = 2, .sequences_per_step = 5, .sequence_cursor = 7, .max_tokens_per_microbatch = 10, .shards = 2};
  auto slices = plan_batch(lengths, sampled, rewards, o);
  ASSERT_TRUE(slices) << slices.error().message;
  ASSERT_EQ(slices->size(), 2u);
  for (int64_t step = 0; step < 2; ++step) {
    // Step 0 trains 7 8 0 1 2, step 1 trains 3 4 5 6 7 (the round robin wraps).
    const auto pick = selection(9, 5, 7, step);
    std::vector<int64_t> pick_lengths;
    for (int64_t g : pick) pick_lengths.push_back(lengths[g]);
    auto expected = pack_microbatches(pick_lengths, {10, 2});
    ASSERT_TRUE(expected) << expected.error().message;
    std::map<int64_t, int> seen;
    for (size_t s = 0; s < 2; ++s) {
      const auto& slice = (*slices)[s];
      ASSERT_EQ(slice.steps.size(), 2u);
      const auto& plan = slice.steps[static_cast<size_t>(step)];
      EXPECT_EQ(plan.sequences, 5);
      int64_t tokens = 0, sampled_sum = 0;
      double reward_sum = 0;
      for (int64_t g : pick) tokens += lengths[g], sampled_sum += sampled[g], reward_sum += rewards[g];
      EXPECT_EQ(plan.tokens, tokens);
      EXPECT_EQ(plan.sampled_tokens, sampled_sum);
      EXPECT_DOUBLE_EQ(plan.reward_sum, reward_sum);
      EXPECT_TRUE(plan.skip_reason.empty());
      // The shard's micro-batches are the packing's non-empty ones of shard s, in order, each
      // naming (through the local indices) the very trajectories the packing put there.
      std::vector<std::vector<int64_t>> want;
      int64_t want_tokens = 0;
      for (const auto& mb : expected->shards[s]) {
        if (mb.sequences.empty()) continue;
        std::vector<int64_t> g;
        for (int64_t j : mb.sequences) g.push_back(pick[static_cast<size_t>(j)]);
        want.push_back(g);
        want_tokens += mb.tokens;
      }
      std::vector<std::vector<int64_t>> got;
      int64_t got_tokens = 0;
      for (const auto& mb : plan.microbatches) {
        std::vector<int64_t> g;
        for (int64_t l : mb) {
          ASSERT_GE(l, 0);
          ASSERT_LT(l, static_cast<int64_t>(slice.sequences.size()));
          g.push_back(slice.sequences[static_cast<size_t>(l)]);
          got_tokens += lengths[slice.sequences[static_cast<size_t>(l)]];
          ++seen[g.back()];
        }
        got.push_back(g);
      }
      EXPECT_EQ(got, want) << "shard " << s << " step " << step;
      EXPECT_EQ(got_tokens, want_tokens) << "the shard's tokens are the plan's";
    }
    ASSERT_EQ(seen.size(), pick.size());
    for (int64_t g : pick) EXPECT_EQ(seen[g], 1) << "trajectory " << g << " of step " << step;
  }
  // A shard holds exactly the trajectories its micro-batches use, ascending, each once.
  for (const auto& slice : *slices) {
    std::set<int64_t> used;
    for (const auto& plan : slice.steps)
      for (const auto& mb : plan.microbatches)
        for (int64_t l : mb) used.insert(slice.sequences[static_cast<size_t>(l)]);
    EXPECT_EQ(slice.sequences, std::vector<int64_t>(used.begin(), used.end()));
  }
  // Between them the shards hold all of step 0's tokens (7 8 0 1 2: 6 + 9 + 5 + 3 + 8).
  auto tokens_of = [&](const shard_slice& slice, size_t step) {
    int64_t t = 0;
    for (const auto& mb : slice.steps[step].microbatches)
      for (int64_t l : mb) t += lengths[slice.sequences[static_cast<size_t>(l)]];
    return t;
  };
  EXPECT_EQ(tokens_of((*slices)[0], 0) + tokens_of((*slices)[1], 0), 6 + 9 + 5 + 3 + 8);
}

TEST(BatchPlan, OneShardWithoutABudgetTrainsTheWholeStepAsOneMicroBatchInOrder) {
  auto slices = plan_batch({4, 9, 2}, {1, 1, 1}, {0, 0, 0}, {.steps = 1, .shards = 1});
  ASSERT_TRUE(slices) << slices.error().message;
  ASSERT_EQ(slices->size(), 1u);
  EXPECT_EQ((*slices)[0].sequences, (std::vector<int64_t>{0, 1, 2}));
  ASSERT_EQ((*slices)[0].steps.size(), 1u);
  EXPECT_EQ((*slices)[0].steps[0].microbatches, (std::vector<std::vector<int64_t>>{{0, 1, 2}}));
}

TEST(BatchPlan, ManyShardsWithoutABudgetSplitTheTokensNeverBelowTheLongest) {
  // Budget max(longest 9, ceil(15 / 2) = 8) = 9: {9} on one shard, {4, 2} on the other.
  auto slices = plan_batch({4, 9, 2}, {1, 1, 1}, {0, 0, 0}, {.steps = 1, .shards = 2});
  ASSERT_TRUE(slices) << slices.error().message;
  EXPECT_EQ((*slices)[0].sequences, (std::vector<int64_t>{1}));
  EXPECT_EQ((*slices)[1].sequences, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ((*slices)[1].steps[0].microbatches, (std::vector<std::vector<int64_t>>{{0, 1}}));
}

TEST(BatchPlan, MoreShardsThanTrajectoriesLeavesAShardWithNothingButEveryStep) {
  auto slices = plan_batch({4}, {1}, {1}, {.steps = 2, .max_tokens_per_microbatch = 8, .shards = 3});
  ASSERT_TRUE(slices) << slices.error().message;
  int holding = 0;
  for (const auto& slice : *slices) {
    ASSERT_EQ(slice.steps.size(), 2u) << "a shard without trajectories still takes every step";
    holding += slice.sequences.empty() ? 0 : 1;
    EXPECT_EQ(slice.steps[1].sampled_tokens, 1);
  }
  EXPECT_EQ(holding, 1);
}

TEST(BatchPlan, AStepThatCannotBePackedIsSkippedOnEveryShardWithThePackingsReason) {
  // Step 0 trains 0 and 1 (3 and 12 tokens: 12 exceed the budget of 10); step 1 trains 2 and 3.
  auto slices = plan_batch({3, 12, 2, 5}, {1, 1, 1, 1}, {0, 0, 0, 0},
                           {.steps = 2, .sequences_per_step = 2, .max_tokens_per_microbatch = 10, .shards = 2});
  ASSERT_TRUE(slices) << slices.error().message;
  for (const auto& slice : *slices) {
    EXPECT_NE(slice.steps[0].skip_reason.find("more than max_tokens_per_microbatch = 10"), std::string::npos)
        << slice.steps[0].skip_reason;
    EXPECT_TRUE(slice.steps[0].microbatches.empty());
    EXPECT_TRUE(slice.steps[1].skip_reason.empty());
    for (int64_t g : slice.sequences) EXPECT_TRUE(g == 2 || g == 3) << "only step 1's trajectories are sent";
  }
}

TEST(BatchPlan, BadOptionsAreErrorsNamingTheField) {
  auto sizes = plan_batch({1, 2}, {1}, {0, 0}, {});
  ASSERT_FALSE(sizes);
  EXPECT_NE(sizes.error().message.find("2 lengths, 1 sampled-token counts"), std::string::npos);
  auto steps = plan_batch({1}, {1}, {0}, {.steps = 0});
  ASSERT_FALSE(steps);
  EXPECT_NE(steps.error().message.find("steps must be >= 1"), std::string::npos);
  auto shards = plan_batch({1}, {1}, {0}, {.shards = 0});
  ASSERT_FALSE(shards);
  EXPECT_NE(shards.error().message.find("shards must be >= 1"), std::string::npos);
  auto budget = plan_microbatches({1}, -1, 1);
  ASSERT_FALSE(budget);
  EXPECT_NE(budget.error().message.find("max_tokens_per_microbatch must be >= 0"), std::string::npos);
}

}  // namespace
}  // namespace caf_agent::learner
