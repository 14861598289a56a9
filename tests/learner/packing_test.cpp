// First-fit-decreasing packing and the equal micro-batch count across shards.

#include "learner/packing.hpp"

#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

namespace caf_agent::learner {
namespace {

std::vector<int64_t> tokens_of(const std::vector<micro_batch>& shard) {
  std::vector<int64_t> out;
  for (const auto& mb : shard) out.push_back(mb.tokens);
  return out;
}

TEST(Packing, FirstFitDecreasing) {
  // lengths 5 3 8 2 4, budget 10. Longest first: 8 -> bin A; 5 -> B; 4 -> B (9); 3 -> C;
  // 2 -> A (10). Bins: A {2, 3} 10, B {0, 4} 9, C {1} 3.
  auto plan = pack_microbatches({5, 3, 8, 2, 4}, {10, 1});
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->shards.size(), 1u);
  const auto& mbs = plan->shards[0];
  ASSERT_EQ(mbs.size(), 3u);
  EXPECT_EQ(mbs[0].sequences, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(mbs[1].sequences, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(mbs[2].sequences, (std::vector<int64_t>{1}));
  EXPECT_EQ(tokens_of(mbs), (std::vector<int64_t>{10, 9, 3}));
  EXPECT_EQ(plan->split_microbatches, 0);
  EXPECT_EQ(plan->empty_microbatches, 0);
}

TEST(Packing, SplitsToEqualCountsAcrossShards) {
  // The 3 bins above on 2 shards: the largest bin with two trajectories (A: 8 + 2) is split into
  // {2} 8 and {3} 2, giving 4 bins: 9, 8, 3, 2. Dealt largest first to the lighter shard:
  // 9 -> s0, 8 -> s1, 3 -> s1 (8 < 9), 2 -> s0 (9 < 11): both shards 11 tokens, 2 micro-batches.
  auto plan = pack_microbatches({5, 3, 8, 2, 4}, {10, 2});
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->microbatches_per_shard, 2);
  EXPECT_EQ(plan->split_microbatches, 1);
  EXPECT_EQ(plan->empty_microbatches, 0);
  EXPECT_EQ(tokens_of(plan->shards[0]), (std::vector<int64_t>{9, 2}));
  EXPECT_EQ(tokens_of(plan->shards[1]), (std::vector<int64_t>{8, 3}));
}

TEST(Packing, PadsWithEmptyMicroBatchesWhenNothingSplits) {
  // Three full micro-batches of one trajectory each cannot split: shard 1 gets an empty one.
  auto plan = pack_microbatches({10, 10, 10}, {10, 2});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->microbatches_per_shard, 2);
  EXPECT_EQ(plan->empty_microbatches, 1);
  EXPECT_EQ(tokens_of(plan->shards[0]), (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(tokens_of(plan->shards[1]), (std::vector<int64_t>{10, 0}));
  EXPECT_TRUE(plan->shards[1][1].sequences.empty());
}

TEST(Packing, BadInputIsAnError) {
  auto too_long = pack_microbatches({4, 11}, {10, 1});
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message.find("trajectory 1 has 11 tokens"), std::string::npos);
  EXPECT_FALSE(pack_microbatches({0}, {10, 1}));
  EXPECT_FALSE(pack_microbatches({1}, {0, 1}));
  EXPECT_FALSE(pack_microbatches({1}, {10, 0}));
  auto empty = pack_microbatches({}, {10, 3});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->shards.size(), 3u);
  EXPECT_EQ(empty->microbatches_per_shard, 0);
}

TEST(Packing, RandomBatchesKeepTheInvariants) {
  // Every trajectory exactly once, every micro-batch within budget, equal counts per shard.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t budget = std::uniform_int_distribution<int64_t>(8, 200)(rng);
    const int64_t shards = std::uniform_int_distribution<int64_t>(1, 8)(rng);
    std::vector<int64_t> lengths(std::uniform_int_distribution<int>(0, 60)(rng));
    for (auto& l : lengths) l = std::uniform_int_distribution<int64_t>(1, budget)(rng);
    auto plan = pack_microbatches(lengths, {budget, shards});
    ASSERT_TRUE(plan) << plan.error().message;
    std::multiset<int64_t> seen;
    for (const auto& shard : plan->shards) {
      ASSERT_EQ(static_cast<int64_t>(shard.size()), plan->microbatches_per_shard);
      for (const auto& mb : shard) {
        int64_t sum = 0;
        for (auto s : mb.sequences) {
          seen.insert(s);
          sum += lengths[s];
        }
        EXPECT_EQ(sum, mb.tokens);
        EXPECT_LE(mb.tokens, budget);
      }
    }
    ASSERT_EQ(seen.size(), lengths.size());
    for (int64_t i = 0; i < static_cast<int64_t>(lengths.size()); ++i) EXPECT_EQ(seen.count(i), 1u);
  }
}

}  // namespace
}  // namespace caf_agent::learner
