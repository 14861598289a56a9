// The packed training forward: packed equals each sequence alone (log-probabilities, entropy,
// values and every parameter's gradient), the chunked LM head equals the full one, layer
// checkpointing changes nothing, bf16 compute puts fp32 gradients on the master weights, and
// bad input is an error.
// Shape legend: t tokens, n1 offsets.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "learner/train_forward.hpp"
#include "tests/learner/tiny_decoder.hpp"

namespace caf_agent::learner {
namespace {

using test_support::tiny_config;
using test_support::tiny_decoder;

// Rationale: fp32 on CPU; packed and per-sequence passes differ only by summation order.
constexpr double tol = 1e-5;

torch::Tensor offsets_of(const std::vector<int64_t>& lengths) {
  std::vector<int64_t> o{0};
  for (int64_t l : lengths) o.push_back(o.back() + l);
  return torch::tensor(o, torch::kInt64);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.detach() - b.detach()).abs().max().item<double>();
}

/// A scalar of every output with fixed random weights per token (w_t3: one column per output),
/// so each token's gradient counts.
torch::Tensor probe_loss(const train_forward_output& out, const torch::Tensor& w_t3) {
  return (out.logp_t * w_t3.select(1, 0)).sum() + (out.entropy_t * w_t3.select(1, 1)).sum() +
         (out.values_t * w_t3.select(1, 2)).sum();
}

std::map<std::string, torch::Tensor> grads_of(const policy::decoder& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, p] : model.named_parameters()) {
    out[name] = p.grad().defined() ? p.grad().clone() : torch::zeros_like(p);
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  return out;
}

void expect_same_grads(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b,
                       double rel) {
  for (const auto& [name, g] : a) {
    const double scale = std::max(1.0, g.abs().max().item<double>());
    EXPECT_LT(max_diff(g, b.at(name)) / scale, rel) << name;
  }
}

class packed_forward : public ::testing::TestWithParam<bool> {};

TEST_P(packed_forward, equals_each_sequence_alone_with_gradients) {
  auto model = tiny_decoder(tiny_config(40, 2, GetParam()), 1);
  const std::vector<int64_t> lengths{7, 1, 7, 12, 5, 7};  // equal lengths share one call
  auto offsets = offsets_of(lengths);
  auto tokens_t = torch::randint(0, 40, {offsets[-1].item<int64_t>()}, torch::kInt64);
  auto w_t = torch::randn({tokens_t.size(0), 3});
  train_forward_options o;
  o.want_values = true;
  o.logprob_chunk = 0;
  auto packed = train_forward(model, tokens_t, offsets, o);
  ASSERT_TRUE(packed) << packed.error().message;
  probe_loss(packed.value(), w_t).backward();
  auto packed_grads = grads_of(model);

  int64_t begin = 0;
  torch::Tensor total;
  for (int64_t len : lengths) {
    auto tok = tokens_t.narrow(0, begin, len);
    auto alone = train_forward(model, tok, offsets_of({len}), o);
    ASSERT_TRUE(alone) << alone.error().message;
    const auto& p = packed.value();
    EXPECT_LT(max_diff(p.logp_t.narrow(0, begin, len), alone.value().logp_t), tol);
    EXPECT_LT(max_diff(p.entropy_t.narrow(0, begin, len), alone.value().entropy_t), tol);
    EXPECT_LT(max_diff(p.values_t.narrow(0, begin, len), alone.value().values_t), tol);
    EXPECT_EQ(p.logp_t[begin].item<double>(), 0.0);  // no predecessor
    if (len > 1) {                                   // the decoder's own (unpacked, batched) path agrees too
      torch::NoGradGuard no_grad;
      auto ref = model.token_logprobs(tok.unsqueeze(0))[0];
      EXPECT_LT(max_diff(p.logp_t.narrow(0, begin + 1, len - 1), ref), tol);
      auto ref_values = model.values(tok.unsqueeze(0))[0].narrow(0, 0, len - 1);
      EXPECT_LT(max_diff(p.values_t.narrow(0, begin + 1, len - 1), ref_values), tol);
    }
    auto piece = probe_loss(alone.value(), w_t.narrow(0, begin, len));
    total = total.defined() ? total + piece : piece;
    begin += len;
  }
  total.backward();
  expect_same_grads(packed_grads, grads_of(model), tol);
}

INSTANTIATE_TEST_SUITE_P(qwen2_and_qwen3, packed_forward, ::testing::Values(false, true));

TEST(train_forward, chunked_head_and_layer_checkpointing_change_nothing) {
  auto model = tiny_decoder(tiny_config(50, 3, true), 2);
  auto offsets = offsets_of({9, 4, 11});
  auto tokens_t = torch::randint(0, 50, {24}, torch::kInt64);
  auto w_t = torch::randn({24, 3});
  train_forward_options full;
  full.want_values = true;
  full.logprob_chunk = 0;
  auto ref = train_forward(model, tokens_t, offsets, full);
  ASSERT_TRUE(ref);
  probe_loss(ref.value(), w_t).backward();
  auto ref_grads = grads_of(model);
  for (int64_t chunk : {1, 5, 23, 100}) {
    for (bool checkpoint : {false, true}) {
      train_forward_options o = full;
      o.logprob_chunk = chunk;
      o.checkpoint_layers = checkpoint;
      o.recompute_head = !checkpoint || chunk != 5;  // chunks kept for the backward, once
      auto got = train_forward(model, tokens_t, offsets, o);
      ASSERT_TRUE(got);
      EXPECT_LT(max_diff(got.value().logp_t, ref.value().logp_t), tol) << chunk;
      EXPECT_LT(max_diff(got.value().entropy_t, ref.value().entropy_t), tol) << chunk;
      probe_loss(got.value(), w_t).backward();
      expect_same_grads(ref_grads, grads_of(model), tol);
    }
  }
}

TEST(train_forward, entropy_and_temperature_match_the_closed_form) {
  auto model = tiny_decoder(tiny_config(30, 1), 3);
  auto tokens_t = torch::randint(0, 30, {6}, torch::kInt64);
  train_forward_options o;
  o.temperature = 0.7;
  o.logprob_chunk = 2;
  torch::NoGradGuard no_grad;
  auto got = train_forward(model, tokens_t, offsets_of({6}), o);
  ASSERT_TRUE(got);
  auto logp_tv = torch::log_softmax(model.forward(tokens_t.unsqueeze(0))[0] / 0.7, -1);
  auto entropy_t = -(logp_tv.exp() * logp_tv).sum(-1);
  EXPECT_LT(max_diff(got.value().entropy_t.narrow(0, 1, 5), entropy_t.narrow(0, 0, 5)), tol);
  auto lp = logp_tv.narrow(0, 0, 5).gather(1, tokens_t.narrow(0, 1, 5).unsqueeze(1)).squeeze(1);
  EXPECT_LT(max_diff(got.value().logp_t.narrow(0, 1, 5), lp), tol);
}

TEST(train_forward, bf16_compute_puts_fp32_gradients_on_the_master_weights) {
  auto model = tiny_decoder(tiny_config(40, 2), 4);
  auto offsets = offsets_of({10, 6});
  auto tokens_t = torch::randint(0, 40, {16}, torch::kInt64);
  auto w_t = torch::randn({16, 3});
  train_forward_options o;
  o.want_values = true;
  o.logprob_chunk = 4;
  auto ref = train_forward(model, tokens_t, offsets, o);
  ASSERT_TRUE(ref);
  probe_loss(ref.value(), w_t).backward();
  auto ref_grads = grads_of(model);
  o.compute_dtype = torch::kBFloat16;
  o.checkpoint_layers = true;
  auto got = train_forward(model, tokens_t, offsets, o);
  ASSERT_TRUE(got);
  EXPECT_EQ(got.value().logp_t.scalar_type(), torch::kFloat32);
  // Rationale: bf16 keeps 8 mantissa bits (~0.4% per rounding); a few percent after two layers.
  EXPECT_LT(max_diff(got.value().logp_t, ref.value().logp_t), 0.15);
  probe_loss(got.value(), w_t).backward();
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32) << name;
    EXPECT_EQ(p.scalar_type(), torch::kFloat32) << name;
  }
  auto got_grads = grads_of(model);
  std::vector<torch::Tensor> ref_flat, got_flat;
  for (const auto& [name, g] : ref_grads) {
    ref_flat.push_back(g.flatten());
    got_flat.push_back(got_grads.at(name).flatten());
  }
  auto ref_all = torch::cat(ref_flat), got_all = torch::cat(got_flat);
  // Rationale: bf16 rounding; a gradient routed wrongly (or lost) is off by far more than 5%.
  EXPECT_LT((got_all - ref_all).norm().item<double>() / ref_all.norm().item<double>(), 0.05);
}

TEST(train_forward, bad_input_is_an_error) {
  auto model = tiny_decoder(tiny_config(20, 1), 5);
  train_forward_options o;
  auto tokens_t = torch::randint(0, 20, {8}, torch::kInt64);
  EXPECT_FALSE(train_forward(model, tokens_t, offsets_of({3, 4}), o));  // offsets end at 7, not 8
  EXPECT_FALSE(train_forward(model, tokens_t.to(torch::kInt32), offsets_of({8}), o));
  auto too_long = torch::zeros({65}, torch::kInt64);  // context 64
  auto e = train_forward(model, too_long, offsets_of({65}), o);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("context"), std::string::npos) << e.error().message;
  auto bad_id = tokens_t.clone();
  bad_id[3] = 20;
  e = train_forward(model, bad_id, offsets_of({8}), o);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("vocabulary"), std::string::npos) << e.error().message;
  auto no_head = policy::decoder::from_tensors(model.config(), model.named_parameters(), torch::kCPU, torch::kFloat32);
  ASSERT_TRUE(no_head);
  o.want_values = true;
  EXPECT_FALSE(train_forward(no_head.value(), tokens_t, offsets_of({8}), o));
}

}  // namespace
}  // namespace caf_agent::learner
