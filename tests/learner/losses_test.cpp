// PPO (clip-higher, aggregation, TIS, band masking), value loss, value pretraining, RFT, KL and
// entropy against values computed by hand in the comments.

#include "learner/losses.hpp"

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

// logp with grad such that exp(logp - old) is `ratios` (old = -1 everywhere).
torch::Tensor logp_for_ratios(const std::vector<double>& ratios) {
  std::vector<float> lp;
  for (double r : ratios) lp.push_back(static_cast<float>(-1.0 + std::log(r)));
  return f32(lp).requires_grad_(true);
}

TEST(PpoLoss, ClipHigherIsAsymmetric) {
  // eps_low 0.2, eps_high 0.28: the ratio is clipped to [0.8, 1.28].
  //  r     A    -min(rA, clip(r)A)            clipped?
  //  1.25  +1   -min(1.25, 1.25) = -1.25      no (1.25 < 1.28; symmetric 0.2 would clip it)
  //  1.40  +1   -min(1.40, 1.28) = -1.28      yes, high
  //  0.75  -1   -min(-0.75, -0.8) = 0.8       yes, low
  //  0.85  -1   -min(-0.85, -0.85) = 0.85     no
  //  0.50  +1   -min(0.5, 0.8) = -0.5         no (the pessimistic min keeps the unclipped term)
  //  1.50  -1   -min(-1.5, -1.28) = 1.5       no
  // token mean: (-1.25 - 1.28 + 0.8 + 0.85 - 0.5 + 1.5) / 6 = 0.12 / 6 = 0.02
  ppo_batch b;
  b.logp_t = logp_for_ratios({1.25, 1.40, 0.75, 0.85, 0.50, 1.50});
  b.old_logp_t = torch::full({6}, -1.0f);
  b.advantages_t = f32({1, 1, -1, -1, 1, -1});
  b.loss_mask_t = torch::ones({6}, torch::kInt64);
  b.seq_offsets_n1 = single_sequence_offsets(6);
  ppo_options o;  // defaults: 0.2 / 0.28, seq-mean-token-mean (= token mean for one trajectory)
  auto r = ppo_policy_loss(b, o);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->loss.item<double>(), 0.02, 1e-6);
  EXPECT_EQ(r->tokens, 6);
  EXPECT_NEAR(r->clip_fraction, 2.0 / 6, 1e-6);
  EXPECT_NEAR(r->clip_fraction_low, 1.0 / 6, 1e-6);
  EXPECT_NEAR(r->clip_fraction_high, 1.0 / 6, 1e-6);
  EXPECT_NEAR(r->ratio_mean, 6.25 / 6, 1e-6);  // (1.25 + 1.4 + 0.75 + 0.85 + 0.5 + 1.5) / 6
  EXPECT_NEAR(r->ratio_max, 1.5, 1e-6);
  EXPECT_NEAR(r->ratio_min, 0.5, 1e-6);
  // d loss / d logp_t = -r A / 6 where unclipped (d r / d logp = r), 0 where clipped.
  r->loss.backward();
  const auto g = b.logp_t.grad();
  const double expected[] = {-1.25 / 6, 0, 0, 0.85 / 6, -0.5 / 6, 1.5 / 6};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(g[i].item<double>(), expected[i], 1e-6) << "token " << i;

  // Symmetric clipping (eps_high = 0.2) clips the 1.25 token: -min(1.25, 1.2) = -1.2 and the 1.40
  // token at -1.2: (-1.2 - 1.2 + 0.8 + 0.85 - 0.5 + 1.5) / 6 = 0.25 / 6.
  o.clip_high = 0.2;
  auto sym = ppo_policy_loss(b, o);
  ASSERT_TRUE(sym);
  EXPECT_NEAR(sym->loss.item<double>(), 0.25 / 6, 1e-6);
  EXPECT_NEAR(sym->clip_fraction_high, 2.0 / 6, 1e-6);
}

TEST(PpoLoss, AggregationModes) {
  // r = 1 everywhere, so L_t = -A_t. traj 0 = tokens 0..2 (sampled: token 1, A = 2);
  // traj 1 = tokens 3..6 (sampled 3, 5, 6 with A = 1; token 4 is tool output).
  // seq-mean-token-mean: (-2/1 + -3/3) / 2 = -1.5; token mean: -(2 + 1 + 1 + 1) / 4 = -1.25.
  // Unmasked positions hold NaN / garbage and must affect neither the loss nor the gradient.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ppo_batch b;
  b.logp_t = f32({nan, -1, nan, -1, 5, -1, -1}).requires_grad_(true);
  b.old_logp_t = f32({0, -1, nan, -1, -9, -1, -1});
  b.advantages_t = f32({nan, 2, 0, 1, 3, 1, 1});
  b.loss_mask_t = i64({0, 1, 0, 1, 0, 1, 1});
  b.seq_offsets_n1 = i64({0, 3, 7});
  ppo_options o;
  auto seq = ppo_policy_loss(b, o);
  ASSERT_TRUE(seq) << seq.error().message;
  EXPECT_NEAR(seq->loss.item<double>(), -1.5, 1e-6);
  seq->loss.backward();
  // d/d logp: -A r / T_i / n: token 1: -2/1/2 = -1; tokens 3, 5, 6: -1/3/2 = -1/6.
  const auto g = b.logp_t.grad();
  EXPECT_FALSE(torch::isnan(g).any().item<bool>());
  EXPECT_NEAR(g[1].item<double>(), -1.0, 1e-6);
  EXPECT_NEAR(g[5].item<double>(), -1.0 / 6, 1e-6);
  EXPECT_EQ(g[4].item<double>(), 0.0);
  o.agg.mode = aggregation_mode::token_mean;
  auto tok = ppo_policy_loss(b, o);
  ASSERT_TRUE(tok);
  EXPECT_NEAR(tok->loss.item<double>(), -1.25, 1e-6);
}

TEST(PpoLoss, ApproxKl) {
  // log r = 0.1 and -0.2 (A = 0): k1 = mean(-log r) = (-0.1 + 0.2) / 2 = 0.05;
  // k3 = mean(r - 1 - log r) = ((e^0.1 - 1.1) + (e^-0.2 - 0.8)) / 2.
  ppo_batch b;
  b.logp_t = f32({0.1f, -0.2f});
  b.old_logp_t = f32({0, 0});
  b.advantages_t = f32({0, 0});
  b.loss_mask_t = i64({1, 1});
  b.seq_offsets_n1 = single_sequence_offsets(2);
  auto r = ppo_policy_loss(b, {});
  ASSERT_TRUE(r);
  EXPECT_NEAR(r->approx_kl_k1, 0.05, 1e-6);
  EXPECT_NEAR(r->approx_kl_k3, ((std::exp(0.1) - 1.1) + (std::exp(-0.2) - 0.8)) / 2, 1e-6);
  EXPECT_NEAR(r->loss.item<double>(), 0.0, 1e-9);
  EXPECT_EQ(r->clip_fraction, 0.0);  // A = 0: the clipped term never wins
}

TEST(PpoLoss, TruncatedImportanceSamplingAndBand) {
  // r = 1, A = 1: L_t = -w_t with w = exp(old - sampler) = 3 (capped at 2) and 0.5.
  // token mean with TIS: (-2 - 0.5) / 2 = -1.25; mean weight (2 + 0.5) / 2 = 1.25; one truncated.
  ppo_batch b;
  b.logp_t = f32({-1, -1});
  b.old_logp_t = f32({-1, -1});
  b.advantages_t = f32({1, 1});
  b.loss_mask_t = i64({1, 1});
  b.seq_offsets_n1 = single_sequence_offsets(2);
  b.sampler_logp_t = f32({static_cast<float>(-1 - std::log(3.0)), static_cast<float>(-1 - std::log(0.5))});
  ppo_options o;
  o.truncated_is_cap = 2.0;
  auto tis = ppo_policy_loss(b, o);
  ASSERT_TRUE(tis) << tis.error().message;
  EXPECT_NEAR(tis->loss.item<double>(), -1.25, 1e-5);
  EXPECT_NEAR(tis->is_weight_mean, 1.25, 1e-5);
  EXPECT_EQ(tis->is_truncated, 1);
  // Band [0.6, 2.5] drops both (3 > 2.5, 0.5 < 0.6): an error naming the band.
  o.truncated_is_cap.reset();
  o.mask_ratio_band = ratio_band{0.6, 2.5};
  auto none = ppo_policy_loss(b, o);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("band"), std::string::npos);
  // Band [0.4, 2.5] keeps only the 0.5 token: L = -1 (no TIS), band_masked 1.
  o.mask_ratio_band = ratio_band{0.4, 2.5};
  auto band = ppo_policy_loss(b, o);
  ASSERT_TRUE(band);
  EXPECT_NEAR(band->loss.item<double>(), -1.0, 1e-6);
  EXPECT_EQ(band->band_masked, 1);
  EXPECT_EQ(band->tokens, 1);
  // Without sampler_logp these options are an error.
  b.sampler_logp_t = torch::Tensor{};
  EXPECT_FALSE(ppo_policy_loss(b, o));
}

TEST(PpoLoss, BadInputIsAnError) {
  ppo_batch b;
  b.logp_t = f32({-1, -1});
  b.old_logp_t = f32({-1});
  b.advantages_t = f32({1, 1});
  b.loss_mask_t = i64({1, 1});
  b.seq_offsets_n1 = single_sequence_offsets(2);
  auto shape = ppo_policy_loss(b, {});
  ASSERT_FALSE(shape);
  EXPECT_NE(shape.error().message.find("old_logp"), std::string::npos);
  b.old_logp_t = f32({-1, -1});
  b.loss_mask_t = i64({0, 0});
  auto masked = ppo_policy_loss(b, {});
  ASSERT_FALSE(masked);
  EXPECT_NE(masked.error().message.find("no sampled token"), std::string::npos);
  ppo_options bad;
  bad.clip_low = 1.5;
  b.loss_mask_t = i64({1, 1});
  EXPECT_FALSE(ppo_policy_loss(b, bad));
}

TEST(ValueLoss, MseWithHalfFactorAndClipping) {
  // V = 1, 2, 0.5; R = 1.5, 1, 0.5: 0.5 (V - R)^2 = 0.125, 0.5, 0 -> mean 0.625 / 3.
  auto v_t = f32({1, 2, 0.5f}).requires_grad_(true);
  const auto mask_t = i64({1, 1, 1});
  auto r = value_loss(v_t, {}, f32({1.5f, 1, 0.5f}), mask_t, single_sequence_offsets(3), {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->loss.item<double>(), 0.625 / 3, 1e-6);
  EXPECT_NEAR(r->mse, 1.25 / 3, 1e-6);
  r->loss.backward();  // gradient (V - R) / 3
  EXPECT_NEAR(v_t.grad()[0].item<double>(), -0.5 / 3, 1e-6);
  EXPECT_NEAR(v_t.grad()[1].item<double>(), 1.0 / 3, 1e-6);

  // Clip 0.2 around V_old = 1: token 0 V = 1.5 -> clip 1.2, R = 2: unclipped 0.5 * 0.25 = 0.125,
  // clipped 0.5 * 0.64 = 0.32 -> max is the clipped term (gradient 0). Token 1 V = 1.1 (inside),
  // R = 0: 0.5 * 1.21 = 0.605 both ways. Mean (0.32 + 0.605) / 2 = 0.4625; clip fraction 1/2.
  auto v2_t = f32({1.5f, 1.1f}).requires_grad_(true);
  value_loss_options o;
  o.clip = 0.2;
  auto c = value_loss(v2_t, f32({1, 1}), f32({2, 0}), i64({1, 1}), single_sequence_offsets(2), o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_NEAR(c->loss.item<double>(), 0.4625, 1e-6);
  EXPECT_NEAR(c->clip_fraction, 0.5, 1e-9);
  c->loss.backward();
  EXPECT_NEAR(v2_t.grad()[0].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(v2_t.grad()[1].item<double>(), 1.1 / 2, 1e-6);
  // clip without old values is an error
  EXPECT_FALSE(value_loss(v2_t, {}, f32({2, 0}), i64({1, 1}), single_sequence_offsets(2), o));
}

TEST(ValuePretrain, RegressesOnGaeTargets) {
  // The GAE example of gae_test.cpp (two turns, tool tokens between; V at the sampled tokens
  // 0.5, 0.6, 0.2, 0.4; reward 1): A = 0.414925, 0.3315, 0.77, 0.6, targets V + A.
  // L_VP = 0.5 mean(A^2) = 0.5 (0.172162755625 + 0.10989225 + 0.5929 + 0.36) / 4 = 0.154369375703125.
  auto v_t = f32({9, 9, 0.5f, 0.6f, 9, 9, 9, 0.2f, 0.4f}).requires_grad_(true);
  const auto mask_t = i64({0, 0, 1, 1, 0, 0, 0, 1, 1});
  auto r = value_pretrain_loss(v_t, f32({1}), mask_t, single_sequence_offsets(9), {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->loss.item<double>(), 0.154369375703125, 1e-6);
  r->loss.backward();  // targets are constants: gradient (V - target) / 4 = -A / 4
  EXPECT_NEAR(v_t.grad()[2].item<double>(), -0.414925 / 4, 1e-6);
  EXPECT_NEAR(v_t.grad()[8].item<double>(), -0.6 / 4, 1e-6);
  EXPECT_EQ(v_t.grad()[0].item<double>(), 0.0);
  // A trajectory without a sampled token has nowhere to put its reward.
  EXPECT_FALSE(value_pretrain_loss(v_t.detach(), f32({1, 0}), mask_t, i64({0, 9, 9}), {}));
}

TEST(RftNll, MaskedNegativeLogLikelihood) {
  // One trajectory, sampled tokens 0, 1, 3: NLL = (1 + 2 + 0.5) / 3 = 7/6; token 2 (prompt) ignored.
  auto lp_t = f32({-1, -2, -3, -0.5f}).requires_grad_(true);
  auto r = rft_nll(lp_t, i64({1, 1, 0, 1}), single_sequence_offsets(4));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NEAR(r->loss.item<double>(), 7.0 / 6, 1e-6);
  EXPECT_EQ(r->tokens, 3);
  r->loss.backward();
  EXPECT_NEAR(lp_t.grad()[0].item<double>(), -1.0 / 3, 1e-6);
  EXPECT_EQ(lp_t.grad()[2].item<double>(), 0.0);
  // Two trajectories {0, 1} and {2, 3} (sampled: 0, 1 | 3): seq mean (3/2 + 0.5/1) / 2 = 1;
  // token mean 7/6 (also reported as nll_token_mean in both modes).
  auto s = rft_nll(lp_t, i64({1, 1, 0, 1}), i64({0, 2, 4}));
  ASSERT_TRUE(s);
  EXPECT_NEAR(s->loss.item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(s->nll_token_mean, 7.0 / 6, 1e-6);
  EXPECT_FALSE(rft_nll(lp_t, i64({0, 0, 0, 0}), single_sequence_offsets(4)));
}

TEST(KlAndEntropy, Estimators) {
  // logp = -1, -2; ref = -1.5, -1: d = ref - logp = -0.5, 1.
  // k1 = -d -> mean(0.5, -1) = -0.25; k3 = e^d - 1 - d -> mean(e^-0.5 - 0.5, e - 2).
  auto lp_t = f32({-1, -2}).requires_grad_(true);
  const auto ref_t = f32({-1.5f, -1});
  const auto mask_t = i64({1, 1});
  auto k1 = kl_to_reference(lp_t, ref_t, mask_t, single_sequence_offsets(2), kl_estimator::k1);
  auto k3 = kl_to_reference(lp_t, ref_t, mask_t, single_sequence_offsets(2), kl_estimator::k3);
  ASSERT_TRUE(k1 && k3);
  EXPECT_NEAR(k1->item<double>(), -0.25, 1e-6);
  EXPECT_NEAR(k3->item<double>(), ((std::exp(-0.5) - 0.5) + (std::exp(1.0) - 2.0)) / 2, 1e-6);
  // d k3 / d logp = (1 - e^d) / 2: token 0 (1 - e^-0.5) / 2.
  k3->backward();
  EXPECT_NEAR(lp_t.grad()[0].item<double>(), (1 - std::exp(-0.5)) / 2, 1e-6);
  auto ent = entropy_mean(f32({1, 2, 6}), i64({1, 0, 1}), single_sequence_offsets(3));
  ASSERT_TRUE(ent);
  EXPECT_NEAR(ent->item<double>(), 3.5, 1e-6);  // (1 + 6) / 2
}

}  // namespace
}  // namespace caf_agent::learner
