// GAE over multi-turn trajectories against a hand-worked example.

#include "learner/gae.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "learner/aggregation.hpp"

namespace caf_agent::learner {
namespace {

torch::Tensor f32(std::vector<float> v) {
  return torch::tensor(v, torch::kFloat32);
}
torch::Tensor i64(std::vector<int64_t> v) {
  return torch::tensor(v, torch::kInt64);
}

void expect_near(const torch::Tensor& x_t, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(x_t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(x_t[i].item<double>(), want[i], tol) << "token " << i;
}

TEST(Gae, TwoTurnsWithToolTokensBetween) {
  // Tokens: p p s1 s2 | t t p | s3 s4   (p prompt, t tool output, s sampled); reward 1.
  // The non-sampled tokens hold values (100) that must never enter the chain.
  // Chain over the sampled tokens: V = 0.5, 0.6, 0.2, 0.4; r = 0, 0, 0, 1; V after s4 = 0.
  //   delta_3 = 1 + 0 - 0.4 = 0.6                 A_3 = 0.6
  //   delta_2 = 0 + 0.4 - 0.2 = 0.2               A_2 = 0.2 + 0.95 * 0.6 = 0.77
  //   delta_1 = 0 + 0.2 - 0.6 = -0.4 (s2 -> s3: the next turn's first sampled token)
  //                                               A_1 = -0.4 + 0.95 * 0.77 = 0.3315
  //   delta_0 = 0 + 0.6 - 0.5 = 0.1               A_0 = 0.1 + 0.95 * 0.3315 = 0.414925
  // Returns A + V: 0.914925, 0.9315, 0.97, 1.0.
  const auto values_t = f32({100, 100, 0.5f, 0.6f, 100, 100, 100, 0.2f, 0.4f});
  const auto mask_t = i64({0, 0, 1, 1, 0, 0, 0, 1, 1});
  auto r = gae(values_t, 1.0, mask_t, {1.0, 0.95});
  ASSERT_TRUE(r) << r.error().message;
  expect_near(r->advantages_t, {0, 0, 0.414925, 0.3315, 0, 0, 0, 0.77, 0.6});
  expect_near(r->returns_t, {0, 0, 0.914925, 0.9315, 0, 0, 0, 0.97, 1.0});
  EXPECT_EQ(r->advantages_t.scalar_type(), torch::kFloat32);
}

TEST(Gae, LambdaOneIsMonteCarlo) {
  // gamma = lambda = 1: A_k = R - V_k and every return is the reward.
  const auto values_t = f32({0.3f, 0, 0.1f, -0.2f});
  const auto mask_t = i64({1, 0, 1, 1});
  auto r = gae(values_t, 2.0, mask_t, {1.0, 1.0});
  ASSERT_TRUE(r);
  expect_near(r->advantages_t, {1.7, 0, 1.9, 2.2});
  expect_near(r->returns_t, {2, 0, 2, 2});
  // lambda = 0: one-step TD, A_k = r_k + V_{k+1} - V_k: 0.1 - 0.3, -0.2 - 0.1, 2 + 0.2.
  auto td = gae(values_t, 2.0, mask_t, {1.0, 0.0});
  ASSERT_TRUE(td);
  expect_near(td->advantages_t, {-0.2, 0, -0.3, 2.2});
}

TEST(Gae, DiscountAppliesPerSampledStep) {
  // gamma = 0.5, lambda = 1, V = 0: A_k = 0.5^(K-1-k) R over the sampled steps only, so the tool
  // token between does not count as a step: R = 4 -> 1, 2, 4 (not 0.5, 2, 4).
  auto r = gae(f32({0, 0, 0, 0}), 4.0, i64({1, 1, 0, 1}), {0.5, 1.0});
  ASSERT_TRUE(r);
  expect_near(r->advantages_t, {1, 2, 0, 4});
}

TEST(Gae, PackedChainsNeverCrossTrajectories) {
  // traj 0: s(V 0.5) s(V 0.5), R = 1: A_1 = 1 - 0.5 = 0.5, A_0 = 0 + 0.5 - 0.5 + 0.95 * 0.5 = 0.475.
  // traj 1: p s(V 0.3), R = 0: A = 0 - 0.3 = -0.3. Had traj 0's last token bootstrapped from
  // traj 1's V = 0.3 (or traj 1's reward), A_1 would differ.
  const auto values_t = f32({0.5f, 0.5f, 7, 0.3f});
  const auto mask_t = i64({1, 1, 0, 1});
  auto r = gae_packed(values_t, f32({1, 0}), mask_t, i64({0, 2, 4}), {1.0, 0.95});
  ASSERT_TRUE(r) << r.error().message;
  expect_near(r->advantages_t, {0.475, 0.5, 0, -0.3});
  expect_near(r->returns_t, {0.975, 1.0, 0, 0});
}

TEST(Gae, BadInputIsAnError) {
  auto none = gae(f32({1, 2}), 1.0, i64({0, 0}));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no sampled token"), std::string::npos);
  auto packed = gae_packed(f32({1, 2, 3}), f32({1, 1}), i64({1, 0, 0}), i64({0, 1, 3}));
  ASSERT_FALSE(packed);
  EXPECT_NE(packed.error().message.find("trajectory 1"), std::string::npos);
  auto nan = gae(f32({1, std::numeric_limits<float>::quiet_NaN()}), 1.0, i64({1, 1}));
  ASSERT_FALSE(nan);
  EXPECT_NE(nan.error().message.find("token 1"), std::string::npos);
  // A NaN on a tool token is not part of the chain: fine.
  EXPECT_TRUE(gae(f32({1, std::numeric_limits<float>::quiet_NaN()}), 1.0, i64({1, 0})));
  EXPECT_FALSE(gae(f32({1}), std::nan(""), i64({1})));
  EXPECT_FALSE(gae_packed(f32({1, 2}), f32({1, 1, 1}), i64({1, 1}), i64({0, 1, 2})));  // rewards count
  EXPECT_FALSE(gae(f32({1}), 1.0, i64({1}), {1.5, 0.95}));                             // gamma > 1
}

}  // namespace
}  // namespace caf_agent::learner
