// Aggregation modes, offsets checks, all_finite and explained_variance against hand-computed values.

#include "learner/aggregation.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace caf_agent::learner {
namespace {

torch::Tensor f32(std::vector<float> v) {
  return torch::tensor(v, torch::kFloat32);
}
torch::Tensor i64(std::vector<int64_t> v) {
  return torch::tensor(v, torch::kInt64);
}

TEST(Aggregation, SeqMeanTokenMeanWeighsTrajectoriesEqually) {
  // traj 0: tokens 0..2, sampled token 1 (value 2); traj 1: tokens 3..6, sampled 3, 5, 6 (1, 1, 1);
  // unmasked tokens hold NaN, which must not leak.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto values_t = f32({nan, 2, nan, 1, nan, 1, 1});
  const auto mask_t = i64({0, 1, 0, 1, 0, 1, 1});
  const auto offsets_n1 = i64({0, 3, 7});
  // seq mean: (2/1 + 3/3) / 2 = 1.5
  auto seq = masked_aggregate(values_t, mask_t, offsets_n1, {aggregation_mode::seq_mean_token_mean, 0});
  ASSERT_TRUE(seq) << seq.error().message;
  EXPECT_NEAR(seq->item<double>(), 1.5, 1e-6);
  // token mean: (2 + 1 + 1 + 1) / 4 = 1.25
  auto tok = masked_aggregate(values_t, mask_t, offsets_n1, {aggregation_mode::token_mean, 0});
  ASSERT_TRUE(tok);
  EXPECT_NEAR(tok->item<double>(), 1.25, 1e-6);
  EXPECT_EQ(aggregation_count(mask_t, offsets_n1, aggregation_mode::seq_mean_token_mean), 2.0);
  EXPECT_EQ(aggregation_count(mask_t, offsets_n1, aggregation_mode::token_mean), 4.0);
}

TEST(Aggregation, GlobalDenominatorMakesMicroBatchesAddUp) {
  // The two trajectories above as two micro-batches, each divided by the global count 2:
  // 2/1 / 2 + (3/3) / 2 = 1.5 = the whole batch's loss.
  auto a = masked_aggregate(f32({0, 2, 0}), i64({0, 1, 0}), i64({0, 3}), {aggregation_mode::seq_mean_token_mean, 2});
  auto b =
      masked_aggregate(f32({1, 0, 1, 1}), i64({1, 0, 1, 1}), i64({0, 4}), {aggregation_mode::seq_mean_token_mean, 2});
  ASSERT_TRUE(a && b);
  EXPECT_NEAR(a->item<double>() + b->item<double>(), 1.5, 1e-6);
  // token mean with the global 4 tokens: 2/4 + 3/4 = 1.25
  auto c = masked_aggregate(f32({0, 2, 0}), i64({0, 1, 0}), i64({0, 3}), {aggregation_mode::token_mean, 4});
  auto d = masked_aggregate(f32({1, 0, 1, 1}), i64({1, 0, 1, 1}), i64({0, 4}), {aggregation_mode::token_mean, 4});
  EXPECT_NEAR(c->item<double>() + d->item<double>(), 1.25, 1e-6);
}

TEST(Aggregation, EmptyTrajectoryIsLeftOutAndAllMaskedIsAnError) {
  // traj 0 has no sampled token: the mean is over traj 1 only, (3 + 5) / 2 = 4.
  auto r = masked_aggregate(f32({7, 7, 3, 5}), i64({0, 0, 1, 1}), i64({0, 2, 4}), {});
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->item<double>(), 4.0, 1e-6);
  auto all_masked = masked_aggregate(f32({1, 2}), i64({0, 0}), i64({0, 2}), {});
  ASSERT_FALSE(all_masked);
  EXPECT_NE(all_masked.error().message.find("no sampled token"), std::string::npos);
  auto empty = masked_aggregate(torch::zeros({0}), torch::zeros({0}, torch::kInt64), i64({0}), {});
  EXPECT_FALSE(empty);
}

TEST(Aggregation, OffsetsAreChecked) {
  EXPECT_FALSE(check_offsets(i64({1, 3}), 3, "t"));        // must start at 0
  EXPECT_FALSE(check_offsets(i64({0, 2, 1, 3}), 3, "t"));  // decreasing
  auto end = check_offsets(i64({0, 2}), 3, "t");           // ends short of the tokens
  ASSERT_FALSE(end);
  EXPECT_NE(end.error().message.find("3 tokens"), std::string::npos);
  EXPECT_FALSE(check_offsets(f32({0, 3}), 3, "t"));    // not int64
  EXPECT_TRUE(check_offsets(i64({0, 0, 3}), 3, "t"));  // an empty trajectory is a valid layout
  EXPECT_TRUE(torch::equal(segment_ids(i64({0, 2, 2, 5}), torch::kCPU), i64({0, 0, 2, 2, 2})));
}

TEST(Aggregation, AllFiniteFindsNanAndInf) {
  EXPECT_TRUE(all_finite({f32({1, -2}), torch::Tensor{}, torch::zeros({0}), i64({5})}));
  EXPECT_FALSE(all_finite({f32({1, std::numeric_limits<float>::quiet_NaN()})}));
  EXPECT_FALSE(all_finite({f32({1}), f32({-std::numeric_limits<float>::infinity()})}));
  // +Inf and -Inf in one tensor sum to NaN: still caught.
  EXPECT_FALSE(all_finite({f32({std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()})}));
  // fp32 extremes whose fp32 sum would overflow are finite.
  EXPECT_TRUE(all_finite({f32({3e38f, 3e38f, 3e38f})}));
  EXPECT_FALSE(all_finite({torch::full({4}, std::numeric_limits<float>::quiet_NaN()).to(torch::kBFloat16)}));
}

TEST(Aggregation, ExplainedVariance) {
  // returns 1, 2, 4 (mean 7/3): Var = (16 + 1 + 25) / 9 / 3 = 14/9; residual 0, 0, 1: Var = 2/9;
  // EV = 1 - (2/9) / (14/9) = 6/7. The unmasked 4th token (garbage) is ignored.
  auto ev = explained_variance(f32({1, 2, 3, 100}), f32({1, 2, 4, -100}), i64({1, 1, 1, 0}));
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_NEAR(*ev, 6.0 / 7.0, 1e-9);
  EXPECT_FALSE(explained_variance(f32({1, 2}), f32({3, 3}), i64({1, 1})));  // zero variance
  EXPECT_FALSE(explained_variance(f32({1, 2}), f32({3, 4}), i64({1, 0})));  // one token
}

}  // namespace
}  // namespace caf_agent::learner
