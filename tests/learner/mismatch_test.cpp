// Sampler/trainer mismatch statistics against hand-computed values.

#include "learner/mismatch.hpp"

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

TEST(Mismatch, StatisticsOverMaskedTokens) {
  // delta = trainer - sampler on the masked tokens 0, 1, 3: -0.1, 0.2, 0 (token 2 is masked out
  // and differs by 5: ignored). |delta| mean 0.1, max 0.2; KL(sampler || trainer):
  // k1 = mean(sampler - trainer) = (0.1 - 0.2 + 0) / 3 = -1/30;
  // k3 = mean(rho - 1 - log rho) = ((e^-0.1 - 0.9) + (e^0.2 - 1.2) + 0) / 3.
  const auto sampler_t = f32({-1, -2, -3, -0.5f});
  const auto trainer_t = f32({-1.1f, -1.8f, 2, -0.5f});
  auto r = mismatch_stats(sampler_t, trainer_t, i64({1, 1, 0, 1}), ratio_band{0.9, 1.1});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->tokens, 3);
  EXPECT_NEAR(r->abs_delta_mean, 0.1, 1e-6);
  EXPECT_NEAR(r->abs_delta_max, 0.2, 1e-6);
  EXPECT_NEAR(r->kl_k1, -1.0 / 30, 1e-6);
  EXPECT_NEAR(r->kl_k3, ((std::exp(-0.1) - 0.9) + (std::exp(0.2) - 1.2)) / 3, 1e-6);
  EXPECT_NEAR(r->ratio_max, std::exp(0.2), 1e-6);
  EXPECT_NEAR(r->ratio_min, std::exp(-0.1), 1e-6);
  EXPECT_NEAR(r->ratio_mean, (std::exp(-0.1) + std::exp(0.2) + 1) / 3, 1e-6);
  EXPECT_EQ(r->outside_band, 1);  // e^0.2 = 1.22 > 1.1; e^-0.1 = 0.905 is inside
}

TEST(Mismatch, BadInputIsAnError) {
  EXPECT_FALSE(mismatch_stats(f32({-1}), f32({-1}), i64({0})));
  EXPECT_FALSE(mismatch_stats(f32({-1, -1}), f32({-1}), i64({1, 1})));
  auto inf = mismatch_stats(f32({-1, -std::numeric_limits<float>::infinity()}), f32({-1, -1}), i64({1, 1}));
  ASSERT_FALSE(inf);
  EXPECT_NE(inf.error().message.find("token 1"), std::string::npos);
}

}  // namespace
}  // namespace caf_agent::learner
