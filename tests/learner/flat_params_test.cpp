// Flat masters and the compute copy: the parameters move into one buffer unchanged (every handle
// follows), the bf16 compute copy's gradients equal those of today's per-parameter casts
// exactly, fp32 compute gathers exactly the per-parameter gradients, the copy follows the
// masters after an optimizer step and an assign, AdamW over the flat buffer equals the
// per-parameter fused AdamW, a non-finite flat gradient skips the step naming the parameter, and
// the trainer's bf16 RFT steps equal today's per-parameter path written out.
// Shape legend: t tokens, p elements of the flat parameters.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "learner/aggregation.hpp"
#include "learner/flat_params.hpp"
#include "learner/losses.hpp"
#include "learner/optimizer.hpp"
#include "learner/train_forward.hpp"
#include "learner/trainer.hpp"
#include "tests/learner/tiny_decoder.hpp"

namespace caf_agent::learner {
namespace {

using test_support::tiny_config;
using test_support::tiny_decoder;

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach().to(torch::kFloat64) - b.detach().to(torch::kFloat64)).abs().max().item<double>();
}

/// Every output with fixed random weights per token, so each token's gradient counts.
torch::Tensor probe_loss(const train_forward_output& out, const torch::Tensor& w_t3) {
  return (out.logp_t * w_t3.select(1, 0)).sum() + (out.entropy_t * w_t3.select(1, 1)).sum() +
         (out.values_t * w_t3.select(1, 2)).sum();
}

struct probe_batch {
  torch::Tensor tokens_t, offsets_n1, w_t3;
};

probe_batch make_batch(int64_t vocab, uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randint(0, vocab, {16}, torch::kInt64), torch::tensor({0, 10, 16}, torch::kInt64),
          torch::randn({16, 3})};
}

TEST(flat_params, masters_move_into_one_buffer_unchanged) {
  auto model = tiny_decoder(tiny_config(40, 2, /*qwen3=*/true), 3);
  const auto handle = model;  // a copy: shares the tensor objects
  std::map<std::string, torch::Tensor> before;
  for (const auto& [name, p] : model.named_parameters()) before[name] = p.detach().clone();
  auto flat = flat_params::create(model.named_parameters());
  ASSERT_TRUE(flat) << flat.error().message;
  const auto& values_p = flat.value()->values_p();
  const auto* begin = values_p.data_ptr<float>();
  int64_t total = 0;
  for (const auto& [name, p] : handle.named_parameters()) {
    EXPECT_TRUE(p.detach().equal(before.at(name))) << name;
    EXPECT_EQ(p.sizes(), before.at(name).sizes()) << name;
    EXPECT_TRUE(p.is_contiguous() && p.is_leaf() && p.requires_grad()) << name;
    const auto* at = p.data_ptr<float>();
    EXPECT_TRUE(at >= begin && at + p.numel() <= begin + values_p.numel()) << name << " lies outside the buffer";
    total += p.numel();
  }
  EXPECT_EQ(values_p.numel(), total);
  // Writing through the flat buffer is writing the parameters.
  {
    at::NoGradGuard no_grad;
    values_p.add_(1.0);
  }
  for (const auto& [name, p] : handle.named_parameters()) EXPECT_TRUE(p.detach().equal(before.at(name) + 1)) << name;

  auto a = torch::randn({3});
  auto shared = flat_params::create({{"a", a}, {"a_again", a.view({3})}});
  ASSERT_FALSE(shared);
  EXPECT_NE(shared.error().message.find("'a' and 'a_again' share memory"), std::string::npos) << shared.error().message;
  auto half = flat_params::create({{"h", torch::randn({2}).to(torch::kHalf)}});
  ASSERT_FALSE(half);
  EXPECT_NE(half.error().message.find("'h' is not fp32"), std::string::npos) << half.error().message;
}

/// Today's path (decoder::cast per parameter, gradients by autograd onto each master) against
/// the compute copy, over two batches accumulated, on the Qwen2 shape (tied embedding: one
/// weight used twice) and the Qwen3 shape (q/k norm, untied head), with and without recomputation.
class compute_copy_grads : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(compute_copy_grads, equal_the_per_parameter_cast_exactly) {
  const auto [qwen3, recompute] = GetParam();
  const auto config = tiny_config(40, 2, qwen3);
  auto old_model = tiny_decoder(config, 5), new_model = tiny_decoder(config, 5);
  auto flat = flat_params::create(new_model.named_parameters());
  ASSERT_TRUE(flat) << flat.error().message;
  auto copy = compute_copy::create(new_model, flat.value(), torch::kBFloat16);
  ASSERT_TRUE(copy) << copy.error().message;
  train_forward_options o;
  o.compute_dtype = torch::kBFloat16;
  o.want_values = true;
  o.logprob_chunk = 4;
  o.checkpoint_layers = recompute;
  for (uint64_t seed : {1, 2}) {
    const auto b = make_batch(config.vocab_size, seed);
    auto old_out = train_forward(old_model, b.tokens_t, b.offsets_n1, o);
    ASSERT_TRUE(old_out) << old_out.error().message;
    auto compute = copy.value().for_forward();
    ASSERT_TRUE(compute) << compute.error().message;
    EXPECT_EQ(compute.value().dtype(), torch::kBFloat16);
    auto new_out = train_forward(compute.value(), b.tokens_t, b.offsets_n1, o);
    ASSERT_TRUE(new_out) << new_out.error().message;
    auto old_loss = probe_loss(old_out.value(), b.w_t3), new_loss = probe_loss(new_out.value(), b.w_t3);
    // The same bf16 weights through the same ops: the same numbers, not merely close ones.
    EXPECT_EQ(old_loss.item<double>(), new_loss.item<double>());
    old_loss.backward();
    new_loss.backward();
  }
  const auto& grad_p = flat.value()->grad_p();
  auto views = flat.value()->views(grad_p);
  const auto& names = flat.value()->names();
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& old_p = old_model.named_parameters().at(names[i]);
    ASSERT_TRUE(old_p.grad().defined()) << names[i];
    // Rationale: each bf16 gradient is cast to fp32 and summed in the same order on both paths
    // (the copy's bf16 gather is exact), so no rounding separates them: equality is the check.
    EXPECT_EQ(max_diff(views[i], old_p.grad()), 0.0) << names[i];
    EXPECT_GT(views[i].abs().max().item<double>(), 0.0) << names[i] << " got no gradient";
  }
  for (const auto& [name, p] : new_model.named_parameters())
    EXPECT_FALSE(p.grad().defined()) << name << ": the gradient belongs in the flat buffer";
}

INSTANTIATE_TEST_SUITE_P(shapes, compute_copy_grads, ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(flat_params, fp32_compute_gathers_the_per_parameter_gradients_exactly) {
  const auto config = tiny_config(40, 2);
  auto old_model = tiny_decoder(config, 6), new_model = tiny_decoder(config, 6);
  auto flat = flat_params::create(new_model.named_parameters());
  ASSERT_TRUE(flat) << flat.error().message;
  train_forward_options o;
  o.want_values = true;
  o.logprob_chunk = 4;
  for (uint64_t seed : {3, 4}) {
    const auto b = make_batch(config.vocab_size, seed);
    for (auto* m : {&old_model, &new_model}) {
      auto out = train_forward(*m, b.tokens_t, b.offsets_n1, o);
      ASSERT_TRUE(out) << out.error().message;
      probe_loss(out.value(), b.w_t3).backward();
    }
  }
  auto views = flat.value()->views(flat.value()->grad_p());
  const auto& names = flat.value()->names();
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_TRUE(views[i].equal(old_model.named_parameters().at(names[i]).grad())) << names[i];
  for (const auto& [name, p] : new_model.named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
}

/// The compute weights of a fresh forward, by name.
policy::tensor_map compute_weights(compute_copy& copy) {
  auto d = copy.for_forward();
  EXPECT_TRUE(d) << d.error().message;
  return d ? d.value().named_parameters() : policy::tensor_map{};
}

TEST(compute_copy, follows_the_masters_after_a_step_and_an_assign) {
  const auto config = tiny_config(40, 2, /*qwen3=*/true);
  auto model = tiny_decoder(config, 7);
  auto opt = adamw::create(model.named_parameters(), {.lr = 0.1});
  ASSERT_TRUE(opt) << opt.error().message;
  auto copy = compute_copy::create(model, opt.value().flat(), torch::kBFloat16);
  ASSERT_TRUE(copy) << copy.error().message;
  auto expect_cast = [&](const char* when) {
    for (const auto& [name, w] : compute_weights(copy.value()))
      EXPECT_TRUE(w.equal(model.named_parameters().at(name).to(torch::kBFloat16))) << when << ": " << name;
  };
  expect_cast("at first");
  const auto b = make_batch(config.vocab_size, 8);
  train_forward_options o;
  o.compute_dtype = torch::kBFloat16;
  o.want_values = true;
  auto out = train_forward(copy.value().for_forward().value(), b.tokens_t, b.offsets_n1, o);
  ASSERT_TRUE(out) << out.error().message;
  probe_loss(out.value(), b.w_t3).backward();
  auto before = model.named_parameters().at("model.norm.weight").detach().clone();
  auto r = opt.value().step();
  ASSERT_TRUE(r.applied) << r.skip_reason;
  EXPECT_GT(r.grad_norm, 0.0);
  EXPECT_FALSE(model.named_parameters().at("model.norm.weight").detach().equal(before));
  expect_cast("after a step");
  auto other = tiny_decoder(config, 9);
  policy::tensor_map fresh;
  for (const auto& [name, p] : other.named_parameters()) fresh[name] = p.detach();
  ASSERT_TRUE(model.assign(fresh));
  expect_cast("after an assign");
}

/// torch's fused AdamW per parameter with _foreach_norm clipping: the optimizer before the flat
/// buffer.
struct reference_adamw {
  std::vector<torch::Tensor> params, m, v, steps;
  adamw_options o;

  reference_adamw(std::vector<torch::Tensor> p, const adamw_options& options) : params(std::move(p)), o(options) {
    for (const auto& x : params) {
      m.push_back(torch::zeros_like(x));
      v.push_back(torch::zeros_like(x));
      steps.push_back(torch::zeros({}));
    }
  }
  void step(std::vector<torch::Tensor> g) {
    at::NoGradGuard no_grad;
    for (auto& x : g) x = x.clone();
    const double norm = torch::stack(at::_foreach_norm(g, 2)).norm().item<double>();
    if (o.max_grad_norm > 0 && norm > o.max_grad_norm) at::_foreach_mul_(g, o.max_grad_norm / (norm + 1e-6));
    at::_foreach_add_(steps, 1);
    at::_fused_adamw_(params, g, m, v, {}, steps, o.lr, o.beta1, o.beta2, o.weight_decay, o.eps, false, false);
  }
};

TEST(adamw, flat_steps_equal_the_per_parameter_fused_adamw) {
  torch::manual_seed(10);
  const std::vector<std::vector<int64_t>> shapes{{7, 5}, {5}, {3, 4, 2}, {33}};
  std::vector<torch::Tensor> ref, mine;
  policy::tensor_map params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ref.push_back(torch::randn(shapes[i]));
    mine.push_back(ref.back().clone());
    params["p" + std::to_string(i)] = mine.back();
  }
  std::vector<std::vector<torch::Tensor>> grads(3);
  for (auto& g : grads)
    for (const auto& s : shapes) g.push_back(torch::randn(s));
  const adamw_options o{.lr = 0.05, .weight_decay = 0.1, .max_grad_norm = 2.0};  // clips every step
  reference_adamw reference(ref, o);
  for (const auto& g : grads) reference.step(g);
  auto opt = adamw::create(params, o);
  ASSERT_TRUE(opt) << opt.error().message;
  for (const auto& g : grads) {
    for (size_t i = 0; i < mine.size(); ++i) mine[i].mutable_grad() = g[i].clone();
    auto r = opt.value().step();
    ASSERT_TRUE(r.applied && r.clipped);
  }
  // Rationale: the same elementwise update; only the grad norm is summed in another order (one
  // reduction instead of a norm of norms), which moves the clip factor by an ulp or so.
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_LT(max_diff(mine[i], ref[i]), 1e-6) << i;
}

TEST(adamw, non_finite_flat_gradient_skips_and_names_the_parameter) {
  const auto config = tiny_config(40, 2);
  auto model = tiny_decoder(config, 11);
  auto opt = adamw::create(model.named_parameters(), {.lr = 0.1});
  ASSERT_TRUE(opt) << opt.error().message;
  auto copy = compute_copy::create(model, opt.value().flat(), torch::kBFloat16);
  ASSERT_TRUE(copy) << copy.error().message;
  const std::string bad = "model.layers.1.mlp.up_proj.weight";
  auto weights = compute_weights(copy.value());
  (weights.at(bad).to(torch::kFloat32) * std::numeric_limits<float>::infinity()).sum().backward();
  const auto values_before = opt.value().flat()->values_p().detach().clone();
  auto r = opt.value().step();
  EXPECT_FALSE(r.applied);
  EXPECT_NE(r.skip_reason.find("'" + bad + "'"), std::string::npos) << r.skip_reason;
  EXPECT_TRUE(opt.value().flat()->values_p().detach().equal(values_before));
  EXPECT_EQ(opt.value().steps(), 0);
  for (const auto& [name, m] : opt.value().state()) EXPECT_EQ(m.abs().max().item<double>(), 0.0) << name;
  // The skipped gradient is gone: the next step sees only its own.
  weights = compute_weights(copy.value());
  weights.at("model.norm.weight").to(torch::kFloat32).sum().backward();
  r = opt.value().step();
  ASSERT_TRUE(r.applied) << r.skip_reason;
  EXPECT_NEAR(r.grad_norm, std::sqrt(static_cast<double>(config.hidden_size)), 1e-6);
}

/// The trainer in bf16 (compute copy, flat AdamW) against today's path written out: decoder::cast
/// per parameter in train_forward, the RFT loss, autograd onto each master, per-parameter AdamW.
TEST(trainer, bf16_rft_steps_equal_the_per_parameter_path) {
  const auto config = tiny_config(40, 2, /*qwen3=*/true);
  auto old_model = tiny_decoder(config, 12), new_model = tiny_decoder(config, 12);
  trainer_options options;
  options.forward.compute_dtype = torch::kBFloat16;
  options.forward.logprob_chunk = 4;
  options.actor_optimizer.lr = 1e-2;
  auto made = trainer::create(new_model, std::nullopt, options);
  ASSERT_TRUE(made) << made.error().message;
  std::vector<std::string> names;
  std::vector<torch::Tensor> old_params;
  for (const auto& [name, p] : old_model.named_parameters()) {
    names.push_back(name);
    old_params.push_back(p);
  }
  reference_adamw reference(old_params, options.actor_optimizer);
  for (uint64_t seed : {13, 14}) {
    const auto b = make_batch(config.vocab_size, seed);
    rollout_batch batch;
    batch.tokens_t = b.tokens_t;
    batch.seq_offsets_n1 = b.offsets_n1;
    batch.loss_mask_t = torch::ones({16});
    batch.loss_mask_t[0] = 0;
    batch.loss_mask_t[10] = 0;
    batch.rewards_n = torch::ones({2});
    auto r = made.value().step(batch, train_stage::rft);
    ASSERT_TRUE(r && r.value().applied) << (r ? r.value().skip_reason : r.error().message);

    train_forward_options o = options.forward;
    o.want_entropy = false;
    auto out = train_forward(old_model, b.tokens_t, b.offsets_n1, o);
    ASSERT_TRUE(out) << out.error().message;
    aggregation agg{.denominator = aggregation_count(batch.loss_mask_t, b.offsets_n1, options.ppo.agg.mode)};
    auto nll = rft_nll(out.value().logp_t, batch.loss_mask_t, b.offsets_n1, agg);
    ASSERT_TRUE(nll) << nll.error().message;
    EXPECT_EQ(nll.value().loss.item<double>(), r.value().policy_loss) << "seed " << seed;
    nll.value().loss.backward();
    std::vector<torch::Tensor> grads;
    for (auto& p : old_params) {
      grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
      p.mutable_grad() = torch::Tensor();
    }
    reference.step(grads);
  }
  // Rationale: the gradients are equal (compute_copy_grads); only the grad norm's summation
  // order differs, so the clip factor and with it the weights may move by an ulp or so.
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_LT(max_diff(old_params[i], new_model.named_parameters().at(names[i])), 1e-6) << names[i];
}

TEST(compute_copy, decoder_with_parameters_refuses_another_layout) {
  auto model = tiny_decoder(tiny_config(40, 1), 15);
  policy::tensor_map params;
  for (const auto& [name, p] : model.named_parameters()) params[name] = p.detach().to(torch::kBFloat16);
  auto same = model.with_parameters(params);
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_EQ(same.value().dtype(), torch::kBFloat16);
  EXPECT_TRUE(same.value().named_parameters().at("model.norm.weight").is_same(params.at("model.norm.weight")));
  auto expect_error = [&](policy::tensor_map bad, const std::string& what) {
    auto r = model.with_parameters(bad);
    ASSERT_FALSE(r) << what;
    EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
  };
  auto missing = params;
  missing.erase("model.norm.weight");
  missing["model.extra"] = torch::zeros({1}, torch::kBFloat16);
  expect_error(missing, "'model.norm.weight' is missing");
  auto misshapen = params;
  misshapen["model.norm.weight"] = torch::zeros({3}, torch::kBFloat16);
  expect_error(misshapen, "'model.norm.weight' has shape [3]");
  auto mixed = params;
  mixed["model.norm.weight"] = mixed["model.norm.weight"].to(torch::kFloat32);
  expect_error(mixed, "'model.norm.weight' differs in dtype");
}

}  // namespace
}  // namespace caf_agent::learner
