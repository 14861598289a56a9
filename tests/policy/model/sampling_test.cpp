// Unit tests of the inverse-CDF draw (policy/model/sampling.cpp): the two-level draw picks what
// one cumulative sum over the whole row picks, never an entry of weight zero, at either end of
// the uniform's range and for rows with one entry of weight.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/torch.h>

#include "policy/model/sampling.hpp"

using caf_agent::policy::draw_inverse_cdf;

namespace {

// The reference: the first index whose cumulative weight over the whole row exceeds u * total.
torch::Tensor one_level(const torch::Tensor& weights_bv, const torch::Tensor& uniform_b) {
  auto cdf_bv = weights_bv.cumsum(-1);
  auto target_b1 = (uniform_b * cdf_bv.select(1, -1)).unsqueeze(1);
  return torch::searchsorted(cdf_bv, target_b1, false, true).clamp_max(weights_bv.size(1) - 1);
}

// Random weights over a vocabulary that is not a multiple of the block, about half of them
// zero (a top-k / top-p filter leaves zeros anywhere), some rows with one entry of weight.
torch::Tensor weights(int64_t b, int64_t v, torch::ScalarType dtype) {
  auto w = torch::rand({b, v}, torch::TensorOptions().dtype(dtype));
  w = w * (torch::rand({b, v}, torch::TensorOptions().dtype(dtype)) < 0.5);
  w[0].zero_();
  w[0][v - 1] = 1.0;  // the last entry only: in the padded block
  w[1].zero_();
  w[1][0] = 1.0;  // the first entry only
  w[2].zero_();
  w[2][1500] = 0.25;  // one entry inside a block
  return w;
}

}  // namespace

TEST(draw_inverse_cdf, equals_one_cumulative_sum_over_the_row) {
  torch::manual_seed(7);
  const int64_t b = 64, v = 5000;
  int64_t draws = 0;
  for (int round = 0; round < 30; ++round) {
    auto w = weights(b, v, torch::kFloat64);
    auto u = torch::rand({b}, torch::TensorOptions().dtype(torch::kFloat64));
    auto two = draw_inverse_cdf(w, u, 256);
    EXPECT_TRUE(torch::equal(two, one_level(w, u))) << "round " << round;
    EXPECT_TRUE(w.gather(1, two).gt(0).all().item<bool>()) << "a zero-weight entry drawn in round " << round;
    draws += b;
  }
  EXPECT_EQ(draws, 1920);
}

TEST(draw_inverse_cdf, never_draws_a_zero_weight_entry_at_the_ends_of_the_uniform) {
  torch::manual_seed(8);
  const int64_t b = 64, v = 151936;  // a Qwen2 vocabulary: 148.375 blocks of 1,024
  auto w = weights(b, v, torch::kFloat32);
  for (double u : {0.0, 1e-9, 0.5, 0.99999994}) {
    auto u_b = torch::full({b}, u, torch::TensorOptions().dtype(torch::kFloat32));
    auto token_b1 = draw_inverse_cdf(w, u_b);
    ASSERT_EQ(token_b1.sizes(), (std::vector<int64_t>{b, 1}));
    EXPECT_TRUE(token_b1.lt(v).all().item<bool>()) << "u = " << u;
    EXPECT_TRUE(w.gather(1, token_b1).gt(0).all().item<bool>()) << "u = " << u;
    EXPECT_EQ(token_b1[0].item<int64_t>(), v - 1);
    EXPECT_EQ(token_b1[1].item<int64_t>(), 0);
    EXPECT_EQ(token_b1[2].item<int64_t>(), 1500);
  }
  // fp32 over the full vocabulary: the drawn entry's cumulative range holds the target, up to
  // the rounding of two different summation orders.
  auto u_b = torch::rand({b});
  auto token_b1 = draw_inverse_cdf(w, u_b);
  auto cdf_bv = w.to(torch::kFloat64).cumsum(-1);
  auto target_b1 = u_b.to(torch::kFloat64).unsqueeze(1) * cdf_bv.select(1, -1).unsqueeze(1);
  auto after_b1 = cdf_bv.gather(1, token_b1);
  auto before_b1 = after_b1 - w.to(torch::kFloat64).gather(1, token_b1);
  const double slack = 1e-4;  // of a row total of about 38,000
  EXPECT_TRUE(before_b1.le(target_b1 + slack).all().item<bool>());
  EXPECT_TRUE(after_b1.ge(target_b1 - slack).all().item<bool>());
}

// The decoder hands the sampler logits in the model's dtype (decoder::decode); the composite
// samples a bf16 row exactly as its fp32 copy: the same tokens, the same logprobs.
TEST(sample_tokens, samples_bf16_logits_as_their_fp32_copy) {
  using caf_agent::policy::sample_tokens;
  using caf_agent::policy::sampling_params;
  torch::manual_seed(3);
  const int64_t b = 8, v = 3000;
  auto logits_bv = (torch::randn({b, v}) * 4).to(torch::kBFloat16);
  std::vector<sampling_params> params(b);
  std::vector<double> uniforms;
  for (int64_t i = 0; i < b; ++i) {
    params[static_cast<size_t>(i)].temperature = i % 4 == 0 ? 0.0f : 0.5f + 0.25f * static_cast<float>(i);
    if (i == 5) params[static_cast<size_t>(i)].top_k = 50;
    uniforms.push_back(0.1 * static_cast<double>(i) + 0.05);
  }
  const std::vector<int64_t> forced{-1, -1, 17, -1, -1, -1, -1, -1};
  auto half = sample_tokens(logits_bv, params, uniforms, forced);
  auto full = sample_tokens(logits_bv.to(torch::kFloat32), params, uniforms, forced);
  EXPECT_TRUE(torch::equal(half.tokens_b, full.tokens_b));
  EXPECT_TRUE(torch::equal(half.logprobs_b, full.logprobs_b));
  EXPECT_EQ(half.logprobs_b.scalar_type(), torch::kFloat32);
  EXPECT_EQ(half.tokens_b[2].item<int64_t>(), 17);
}
